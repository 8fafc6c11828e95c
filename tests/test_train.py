"""End to end with real parts: a tiny random-init BERT on real examples, Lightning, MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient
from transformers import AutoModelForSequenceClassification

from seedvar.config import load_config
from seedvar.errors import OutputExistsError
from seedvar.seeds.seed import run_seed
from seedvar.training.device import native_cpu_bf16, on_this_machine

pytestmark = pytest.mark.slow
SUBCASES = load_config(None).diagnostics["hans"].groups["subcase"].values or []
SMOKE = ["data.max_train_examples=200", "data.max_eval_examples=300"]


def _smoke(*overrides: str):
    return load_config(None, [*SMOKE, *overrides], profile="smoke")


def test_one_seed_is_trained_evaluated_and_tracked(study_dir: Path):
    result = run_seed(_smoke("train.seed=3"))
    assert result.seed_dir == Path("runs/seed-3")
    for name in ("mnli_matched", "mnli_mismatched", "hans"):
        predictions = pd.read_parquet(result.seed_dir / "predictions" / f"{name}.parquet")
        assert {
            "id",
            "gold",
            "predicted",
            "logit_entailment",
            "logit_neutral",
            "logit_contradiction",
        } <= set(predictions.columns)
        assert len(predictions) == 300
    assert (result.seed_dir / "model" / "model.safetensors").is_file()
    assert (result.seed_dir / "model" / "tokenizer.json").is_file()
    assert not list(result.seed_dir.glob("model/*.pt")) and not list(
        Path(".seedvar/runs").glob("*.partial*")
    )
    saved = json.loads((result.seed_dir / "metrics.json").read_text())
    assert set(SUBCASES) <= set(saved) and 0 <= saved["MNLI dev acc."] <= 1

    client = MlflowClient(f"sqlite:///{Path.cwd()}/mlruns/mlflow.db")
    run = client.get_run(result.run_id)
    config = on_this_machine(_smoke("train.seed=3"))  # its precisions as the seed chose them
    assert run.info.status == "FINISHED"
    assert run.info.run_name == f"seed-3 of smoke {config.study_hash()}"
    assert run.data.params["train.precision"] == ("bf16-mixed" if native_cpu_bf16() else "32-true")
    metrics = run.data.metrics
    assert all(f"hans/{subcase}" in metrics for subcase in SUBCASES)
    assert metrics["hans/ln_subject/object_swap"] == saved["ln_subject/object_swap"]
    assert metrics["mnli/matched_accuracy"] == saved["MNLI dev acc."]
    assert {"hans/lexical_nonent", "hans/overall", "mnli/mismatched_accuracy"} <= set(metrics)
    trajectory = pd.read_csv(result.seed_dir / "trajectory.csv")  # 60 HANS pairs, every 4
    assert sorted(set(trajectory["step"])) == [0, 4, 8, 12, 13]  # before, every 4, the end
    overall = trajectory[trajectory["column"] == "Overall accuracy"]
    assert len(overall) == 5 and overall["accuracy"].between(0, 1).all()
    assert set(trajectory["column"]) >= {"Lexical (nonent)", "ln_subject/object_swap"}
    curve = client.get_metric_history(result.run_id, "trajectory/hans/overall")
    assert [m.step for m in sorted(curve, key=lambda m: m.step)] == [0, 4, 8, 12, 13]
    assert [m.value for m in sorted(curve, key=lambda m: m.step)] == overall["accuracy"].tolist()
    assert run.data.tags["seedvar.init_seed"] == "3" and run.data.tags["seedvar.data_seed"] == "3"
    loss_curve = client.get_metric_history(result.run_id, "train/loss")
    assert len(loss_curve) >= 3  # 13 steps, logged every 2
    assert len(client.get_metric_history(result.run_id, "val/mnli_matched_accuracy")) == 1
    params = run.data.params
    assert params["train.seed"] == "3" and params["train.learning_rate"] == "0.001"
    assert params["data.size.train"] == "200" and len(params["data.fingerprint.hans"]) == 16
    assert params["precision"] == run.data.params["train.precision"] and "git.commit" in params
    assert params["eval_precision"] == ("bf16" if native_cpu_bf16() else "32")
    assert metrics["time/train_seconds"] > 0 and metrics["time/evaluate_seconds"] > 0
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "predictions")}
    assert artifacts == {
        f"predictions/{n}.parquet" for n in ("hans", "mnli_matched", "mnli_mismatched")
    }

    # MLflow's own conventions: experiment kind, description, datasets, model, system metrics
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert run.data.tags["mlflow.note.content"].startswith("Seed 3 of the smoke study")
    assert run.data.tags["mlflow.source.name"] == "seedvar"
    inputs = {d.dataset.name: d for d in run.inputs.dataset_inputs}
    assert set(inputs) == {"train", "validation", "mnli_matched", "mnli_mismatched", "hans"}
    assert inputs["train"].dataset.digest == params["data.fingerprint.train"]
    assert [tag.value for tag in inputs["train"].tags] == ["training"]
    assert params["train.init_seed"] == "3" and params["tracking.uri"].startswith("sqlite:////")
    study = client.get_run(run.data.tags["mlflow.parentRunId"])
    assert study.info.status == "FINISHED"  # not left RUNNING by a plain `seedvar train`
    (model,) = client.search_logged_models([run.info.experiment_id])
    assert model.source_run_id == result.run_id
    assert [output.model_id for output in run.outputs.model_outputs] == [model.model_id]
    assert model.tags["seedvar.weights"] == str((result.seed_dir / "model").resolve())
    local = mlflow.artifacts.download_artifacts(
        f"models:/{model.model_id}", tracking_uri=client.tracking_uri
    )
    reloaded = AutoModelForSequenceClassification.from_pretrained(local)
    saved = AutoModelForSequenceClassification.from_pretrained(result.seed_dir / "model")
    assert all(
        torch.equal(a, b)
        for a, b in zip(reloaded.state_dict().values(), saved.state_dict().values(), strict=True)
    )

    with pytest.raises(OutputExistsError, match="--force"):
        run_seed(_smoke("train.seed=3"))


def _hans_logits(output_dir: str, *overrides: str) -> pd.DataFrame:
    result = run_seed(_smoke("train.seed=5", f"output_dir={output_dir}", *overrides))
    return pd.read_parquet(result.seed_dir / "predictions" / "hans.parquet")


def test_same_seed_twice_is_identical_and_data_seed_matters(study_dir: Path):
    """Also with and without a trajectory: evaluating during training changes no weight."""
    first = _hans_logits("a")
    again = _hans_logits("b", "train.trajectory_examples=0")
    assert Path("a/seed-5/trajectory.csv").is_file()
    assert not Path("b/seed-5/trajectory.csv").exists()
    reordered = _hans_logits("c", "train.data_seed=99")
    pd.testing.assert_frame_equal(first, again)
    logit_columns = ["logit_entailment", "logit_neutral", "logit_contradiction"]
    assert not first[logit_columns].equals(reordered[logit_columns])
