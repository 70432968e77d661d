from pathlib import Path

if TOY:

    rule toy_data:
        """The synthetic task's splits: warm-up pool, RL prompts, validation and one test set per family."""
        output:
            warmup=f"{TREE.toy}/data/warmup.jsonl",
            train=f"{TREE.toy}/data/train.jsonl",
            validation=f"{TREE.toy}/data/validation.jsonl",
            tests=expand(
                f"{TREE.toy}/data/test/{{family}}.jsonl", family=CFG.toy.families
            ),
        log:
            f"{R}/logs/toy_data.log",
        conda:
            "../envs/graft.yaml"
        resources:
            **site_resources("toy_data"),
        params:
            **setting_params({None: (toy_data_params(CFG), (), (), "toy")}),
            config=snapshot_param,
            root=lambda wc, output: Path(output.train).parent.parent,
        shell:
            "graft toy data --config {params.config:q} --out {params.root:q} 2> {log:q}"

else:

    rule fetch_dataset:
        """A benchmark, the MATH train split or the validation set, from the hub as JSON Lines."""
        output:
            f"{R}/data/{{dataset}}.jsonl",
        log:
            f"{R}/logs/fetch/{{dataset}}.log",
        conda:
            "../envs/graft.yaml"
        resources:
            **site_resources("fetch_dataset"),
        params:
            hf_home=hf_home_prefix(),
        shell:
            "{params.hf_home}graft fetch dataset --name {wildcards.dataset} --out {output:q} 2> {log:q}"
