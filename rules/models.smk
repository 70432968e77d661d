from pathlib import Path

if TOY:

    rule toy_model:
        """A tiny model: tokenizer trained from scratch, fresh weights, supervised warm-up, save_pretrained; or a copy
        of the shipped one (toy-models/) where its settings equal it and toy.shipped_models is on (graft/toy/shipped.py).
        """
        input:
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
            **setting_params(
                {
                    m: (
                        toy_model_params(CFG, m),
                        [m],
                        [label.format(model=m) for label in TOY_MODEL_LABELS],
                    )
                    for m in CFG.toy.models
                },
                model_key,
            ),
            config=snapshot_param,
            root=lambda wc, input: Path(input.warmup).parent.parent,
        shell:
            "graft toy model --config {params.config:q} --name {wildcards.model} --out {params.root:q}"
            " --threads {threads} 2> {log:q}"

else:

    rule fetch_model:
        """A model snapshot (safetensors, config, tokenizer) from the Hugging Face hub; its tokenizer must
        apply the model's prompt format (the first rule of the DAG that can check it).
        """
        output:
            directory(f"{R}/models/{{model}}"),
        log:
            f"{R}/logs/fetch_model/{{model}}.log",
        conda:
            "../envs/graft.yaml"
        resources:
            **site_resources("fetch_model"),
        params:
            config=snapshot_param,
            hub_id=lambda wc: CFG.models[wc.model].hub_id,
            hf_home=hf_home_prefix(),
        shell:
            "{params.hf_home}graft fetch model --hub-id {params.hub_id:q} --out {output:q}"
            " --config {params.config:q} --model {wildcards.model} 2> {log:q}"
