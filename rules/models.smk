import json
from pathlib import Path

if TOY:

    rule toy_model:
        """A tiny model: tokenizer trained from scratch, fresh weights, supervised warm-up, save_pretrained."""
        input:
            config=ancient(RUN_CONFIG),
            warmup=f"{TREE.toy}/data/warmup.jsonl",
        output:
            directory(f"{TREE.toy}/models/{{model}}"),
        log:
            f"{R}/logs/toy_model/{{model}}.log",
        conda:
            "../envs/graft.yaml"
        threads: CFG.workflow.build_threads
        resources:
            **site_resources("toy_model"),
        params:
            root=lambda wc, input: Path(input.warmup).parent.parent,
            settings=lambda wc: json.dumps(
                [
                    config["toy"]["models"][wc.model],
                    # the RL learning rate is no part of the build
                    {k: v for k, v in config["models"][wc.model].items() if k != "lr"},
                    config["toy"]["seed"],
                    # how much each model writes in its own dialect (the toy's cross-model mismatch)
                    CFG.toy.mismatch,
                ],
                sort_keys=True,
            ),
        shell:
            "graft toy model --config {input.config} --name {wildcards.model} --out {params.root}"
            " --threads {threads} 2> {log}"

else:

    rule fetch_model:
        """A model snapshot (safetensors, config, tokenizer) from the Hugging Face hub; its tokenizer must
        apply the model's prompt format (the first rule of the DAG that can check it).
        """
        input:
            config=ancient(RUN_CONFIG),
        output:
            directory(f"{R}/models/{{model}}"),
        log:
            f"{R}/logs/fetch_model/{{model}}.log",
        conda:
            "../envs/graft.yaml"
        resources:
            **site_resources("fetch_model"),
        params:
            hub_id=lambda wc: CFG.models[wc.model].hub_id,
            hf_home=hf_home_prefix(),
        shell:
            "{params.hf_home}graft fetch model --hub-id {params.hub_id} --out {output}"
            " --config {input.config} --model {wildcards.model} 2> {log}"
