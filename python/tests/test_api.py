"""headroom.estimate/fit/plan/report on built-in models equal the CLI's JSON and files, and bad
input is one headroom.Error with the CLI's message."""
import json
import os

import pytest

import headroom
from conftest import cli_json, run_cli

MEASURED = os.path.join(os.environ.get("HEADROOM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                        "validation", "captured.json")


def test_estimate_equals_cli_json():
    py = headroom.estimate("resnet50", batch=4, mode="train", optimizer="adamw", device="cpu", foreach=False)
    assert py == cli_json("estimate", "resnet50", "--batch", "4", "--mode", "train", "--optimizer", "adamw",
                          "--device", "cpu", "--no-foreach", "--json")


def test_estimate_with_gpu_options_equals_cli_json():
    py = headroom.estimate("mlp:layers=4,dim=256", batch=8, gpu="T4", expandable_segments=True, micro_batch=2)
    assert py == cli_json("estimate", "mlp:layers=4,dim=256", "--batch", "8", "--gpu", "T4",
                          "--expandable-segments", "--micro-batch", "2", "--json")


def test_generation_and_qlora_keywords_equal_cli_json():
    config = os.path.join(os.environ.get("HEADROOM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                          "validation", "hf-configs", "tiny-llama-gqa.json")
    py = headroom.estimate(config, mode="generate", prompt=5, new_tokens=4, beams=3, cache="static", device="cpu")
    assert py == cli_json("estimate", config, "--mode", "generate", "--prompt", "5", "--new-tokens", "4",
                          "--beams", "3", "--cache", "static", "--device", "cpu", "--json")
    assert py["beams"] == 3 and py["cache"] == "static"
    py = headroom.estimate(config, seq=16, qlora="r=8,alpha=16,targets=q_proj,v_proj")
    assert py == cli_json("estimate", config, "--seq", "16", "--qlora", "r=8,alpha=16,targets=q_proj,v_proj", "--json")
    with pytest.raises(headroom.InputError, match="conflicts with --optimizer adamw"):
        headroom.estimate(config, seq=16, qlora="r=8,targets=q_proj", optimizer="adamw")


def test_fit_equals_cli_json():
    assert headroom.fit("resnet18", gpu="T4") == cli_json("fit", "resnet18", "--gpu", "T4", "--json")


def test_fit_next_steps_when_nothing_fits_equal_cli_json():
    # resnet152 training does not fit 1 GiB at batch 1: the same next steps as the CLI's.
    py = headroom.fit("resnet152", gpu_memory="1GiB")
    assert py == cli_json("fit", "resnet152", "--gpu-memory", "1GiB", "--json")
    assert py["max_batch"] == 0
    assert any(s["change"] == "--optimizer adamw8bit" for s in py["next_steps"])


def test_estimate_time_equals_cli_json():
    py = headroom.estimate("gpt2", batch=2, seq=256, gpu="L4", tokens=100000, epochs=2, host_memory="pinned")
    assert py == cli_json("estimate", "gpt2", "--batch", "2", "--seq", "256", "--gpu", "L4", "--tokens", "100000",
                          "--epochs", "2", "--host-memory", "pinned", "--json")
    assert py["throughput"]["unit"] == "tokens/s"
    assert py["time"]["run"]["rule"]["formula"] == "6*N*P"


def test_fit_objective_equals_cli_json():
    py = headroom.fit("mlp:layers=2,dim=256", gpu="all", objective="cost", price=["T4=0.30", "L4=0.50"])
    assert py == cli_json("fit", "mlp:layers=2,dim=256", "--gpu", "all", "--objective", "cost", "--price", "T4=0.30",
                          "--price", "L4=0.50", "--json")
    assert py["ranking"]["objective"] == "cost"


def test_time_options_that_do_not_apply():
    with pytest.raises(headroom.Error, match="--samples applies to estimate, not fit"):
        headroom.fit("resnet18", gpu="T4", samples=10)
    with pytest.raises(headroom.Error, match="--objective applies to fit, not estimate"):
        headroom.estimate("resnet18", gpu="T4", objective="cost")


def test_plan_equals_cli_json():
    py = headroom.plan("mlp:layers=8,dim=512", batch=64, budget="40MiB", device="cpu")
    assert py == cli_json("plan", "mlp:layers=8,dim=512", "--batch", "64", "--budget", "40MiB", "--device", "cpu",
                          "--json")


def test_report_writes_the_cli_page(tmp_path):
    ours, theirs = tmp_path / "py.html", tmp_path / "cli.html"
    headroom.report("resnet18", batch=2, path=str(ours))
    code, _, err = run_cli("report", "resnet18", "--batch", "2", "-o", str(theirs))
    assert code == 0, err
    assert ours.read_bytes() == theirs.read_bytes()


def test_report_with_a_measured_watch_file(tmp_path):
    run = tmp_path / "run.csv"
    run.write_text("t_ms,device,device_used_bytes,device_total_bytes,process_used_bytes,gpu_util_pct,memory_util_pct\n"
                   "0,0,400000000,42949672960,,,\n100,0,900000000,42949672960,,,\n200,0,500000000,42949672960,,,\n")
    ours, theirs = tmp_path / "py.html", tmp_path / "cli.html"
    headroom.report("resnet18", batch=2, gpu="A100-40GB", measured=str(run), path=str(ours))
    code, _, err = run_cli("report", "resnet18", "--batch", "2", "--gpu", "A100-40GB", "--measured", str(run), "-o", str(theirs))
    assert code == 0, err
    assert ours.read_bytes() == theirs.read_bytes()
    assert b'class="measured"' in ours.read_bytes()
    with pytest.raises(headroom.Error, match="needs --gpu NAME"):
        headroom.report("resnet18", measured=str(run), path=str(tmp_path / "none.html"))
    assert not (tmp_path / "none.html").exists()


def test_optimizer_instance_and_class():
    torch = pytest.importorskip("torch")
    p = [torch.nn.Parameter(torch.zeros(1))]
    by_name = headroom.estimate("resnet18", optimizer="momentum", foreach=True)
    assert headroom.estimate("resnet18", optimizer=torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True)) == by_name
    assert headroom.estimate("resnet18", optimizer=torch.optim.AdamW) == headroom.estimate("resnet18", optimizer="adamw")
    with pytest.raises(headroom.Error, match="amsgrad"):
        headroom.estimate("resnet18", optimizer=torch.optim.Adam(p, amsgrad=True))


@pytest.mark.parametrize("options,flags", [
    ({"mode": "fast"}, ["--mode", "fast"]),
    ({"batch": 0}, ["--batch", "0"]),
    ({"precision": "fp8"}, ["--precision", "fp8"]),
    ({"gpu": "NoSuchGPU"}, ["--gpu", "NoSuchGPU"]),
])
def test_bad_values_carry_the_cli_message(options, flags):
    code, out, err = run_cli("estimate", "resnet18", *flags)
    assert code == 2 and out == ""
    with pytest.raises(headroom.InputError) as e:
        headroom.estimate("resnet18", **options)
    assert "headroom: " + str(e.value) + "\n" == err


def test_unknown_model_carries_the_cli_message():
    code, _, err = run_cli("estimate", "resnet5000")
    with pytest.raises(headroom.Error) as e:
        headroom.estimate("resnet5000")
    assert "headroom: " + str(e.value) + "\n" == err


def test_unknown_option_names_it():
    with pytest.raises(headroom.Error, match="unknown option 'batchsize'"):
        headroom.estimate("resnet18", batchsize=4)


def test_bad_flag_value_names_it():
    with pytest.raises(headroom.Error, match="nccl must be True or False"):
        headroom.estimate("resnet18", gpu="T4", nccl="yes")


def test_report_write_failure_leaves_nothing(tmp_path):
    target = tmp_path / "missing-dir" / "r.html"
    with pytest.raises(headroom.Error):
        headroom.report("resnet18", path=str(target))
    assert not target.exists()


def test_not_a_model():
    with pytest.raises(headroom.Error, match="model must be"):
        headroom.estimate(42)


def test_example_inputs_with_a_builtin_model():
    with pytest.raises(headroom.Error, match="apply to an nn.Module"):
        headroom.estimate("resnet18", example_inputs=(1,))


def test_error_hierarchy():
    assert issubclass(headroom.InputError, headroom.Error)
    assert issubclass(headroom.Error, Exception)


def test_threads_equals_cli_json_and_the_measurement():
    # resnet50 training at batch 2, 64x64, on 2 CPU threads sends its 1x1 stride-1 convolutions to
    # oneDNN: another peak than on 1 thread. Both are measured (validation/captured.json, the
    # captured torchvision resnet50, whose graph is the built-in's).
    measured = {c["id"]: c["measured"]["peak_bytes"] for c in json.load(open(MEASURED))["cases"]}
    for threads, suffix in ((1, ""), (2, "/t2")):
        py = headroom.estimate("resnet50:image=64", batch=2, device="cpu", threads=threads, optimizer="sgd",
                               foreach=False)
        assert py == cli_json("estimate", "resnet50:image=64", "--batch", "2", "--device", "cpu", "--threads",
                              str(threads), "--optimizer", "sgd", "--no-foreach", "--json")
        assert py["peak_bytes"] == measured["captured:resnet50/train/b2/sgd/no-foreach/dropout-on" + suffix]


def test_threads_apply_to_the_cpu_profile_only():
    code, out, err = run_cli("estimate", "resnet50", "--threads", "2")
    assert code == 2 and out == ""
    with pytest.raises(headroom.InputError) as e:
        headroom.estimate("resnet50", threads=2)
    assert "headroom: " + str(e.value) + "\n" == err


def test_pipeline_keywords_equal_cli_json():
    py = headroom.estimate("gpt2:layers=4", seq=64, precision="bf16", gpus=8, pipeline_parallel=4, micro_batch=1,
                           grad_accum=8)
    assert py == cli_json("estimate", "gpt2:layers=4", "--seq", "64", "--precision", "bf16", "--gpus", "8",
                          "--pipeline-parallel", "4", "--micro-batch", "1", "--grad-accum", "8", "--json")
    assert py["per_gpu"]["in_flight_micro_batches"] == 4 - py["per_gpu"]["stage"]
    with pytest.raises(headroom.InputError, match="is not a multiple of --tensor-parallel 1 x --pipeline-parallel 3"):
        headroom.estimate("gpt2:layers=4", gpus=8, pipeline_parallel=3, micro_batch=1, grad_accum=8)


def test_fsdp_wrap_keyword_equals_cli_json():
    # The FSDP unit choice reaches the library through the same keyword table as the CLI.
    model = "gpt2:layers=2,hidden=64,heads=2,vocab=128,n_positions=16"
    for wrap in ("block", "param"):
        py = headroom.estimate(model, seq=16, precision="bf16", gpus=4, fsdp="full", fsdp_wrap=wrap)
        assert py == cli_json("estimate", model, "--seq", "16", "--precision", "bf16", "--gpus", "4", "--fsdp", "full",
                              "--fsdp-wrap", wrap, "--json")
        assert py["per_gpu"]["layout"]["fsdp_wrap"] == wrap
    with pytest.raises(headroom.InputError, match="no repeated blocks"):
        headroom.estimate("mlp:layers=2,dim=64", precision="bf16", gpus=2, fsdp="full", fsdp_wrap="block")
