"""Evaluation with the paper's protocol: k samples per problem through the training agent loop and sandbox,
avg@k / unbiased pass@k / maj@k with bootstrap CIs, an offline LiveCodeBench scorer, tool-use statistics, and a
report (JSON + PNG plots + a Table-2-style Markdown table).

    from agentrl_recipe.eval.protocol import EvalConfig
    from agentrl_recipe.eval.runner import run_eval
    report = run_eval(EvalConfig(model="path/to/model", data=["eval.parquet"], out_dir="runs/eval/x"))
"""
