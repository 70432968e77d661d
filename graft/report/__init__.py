"""Tables and figures from a results tree, with the paper's numbers beside ours."""
