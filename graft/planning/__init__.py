"""Planning for the cluster: the workflow's cells, memory per GPU, step time, each job's length, the disk, how a
job starts its processes, and the checks before any compute."""
