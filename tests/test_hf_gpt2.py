"""Imported GPT-2 against Hugging Face transformers itself (issue 16), where
PyTorch and transformers are installed (the GPU machine; make test-gpu runs
it): a random GPT2LMHeadModel, its biases drawn large enough to matter,
saved with save_pretrained and imported; its logits, one head's attention
(output_attentions, eager attention) and 100 greedy tokens against HF's,
on the CPU and (where there is one) the GPU; then exported and loaded back
by from_pretrained, and fine-tuned by andrea-train.  Skipped elsewhere."""
import json
import os

import numpy as np
import pytest

import atsfmt
from conftest import build_settings, run
from stagekit import pack, unpack, pipeline

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if "JSON=0" in build_settings():
    pytest.skip("this build has no jansson, so no andrea-import (the GPU "
                "machine: carry Debian's libjansson .debs, make JSON=1)",
                allow_module_level=True)

TOL = 1e-5
ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"
DEVICES = ["cpu"] + (["cuda"] if ON_GPU else [])


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module", params=[1000, 257], ids=["V1000", "V257"])
def hf(request, tmp_path_factory):
    V = request.param
    torch.manual_seed(V)
    cfg = transformers.GPT2Config(n_layer=3, n_head=4, n_embd=128, vocab_size=V,
                                  n_positions=256, resid_pdrop=0, embd_pdrop=0,
                                  attn_pdrop=0)
    cfg._attn_implementation = "eager"  # output_attentions needs it
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.5)
    d = tmp_path_factory.mktemp(f"hf{V}")
    model.save_pretrained(d)
    out = d / "m.ats"
    run("import", d, "-o", out, check=0)
    return model, out, V, d


@pytest.mark.parametrize("device", DEVICES)
def test_logits_and_attention_equal_hf(hf, tmp_path, device):
    model, m, V, _ = hf
    dev = ("--device", device)
    tok = np.random.default_rng(V).integers(0, V, (2, 50)).astype(np.int32)
    s = pack(tmp_path, [("tokens", tok)])
    with torch.no_grad():
        ref = model(torch.tensor(tok, dtype=torch.long), output_attentions=True)
    out = unpack(tmp_path, pipeline([("embed", "-m", m),
                                     ("block", "-m", m, "-l", "all", *dev),
                                     ("logits", "-m", m, *dev)], input=s))
    assert rel(out["logits"], ref.logits.numpy()) <= TOL
    att = unpack(tmp_path, pipeline(
        [("embed", "-m", m), ("block", "-m", m, "-l", 0, *dev),
         ("qkv", "-m", m, "-l", 1, "--head", 2), ("scores",), ("mask",),
         ("softmax",)], input=s), "a")["attn"][:, 0]
    assert rel(att, ref.attentions[1][:, 2].numpy()) <= TOL


def test_exported_model_loads_in_hf(hf, tmp_path):
    model, m, V, _ = hf
    run("export", "-m", m, tmp_path / "back", check=0)
    back = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "back").eval()
    tok = torch.tensor(np.random.default_rng(1).integers(0, V, (1, 30)))
    with torch.no_grad():
        assert rel(back(tok).logits.numpy(), model(tok).logits.numpy()) <= TOL


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_generation_equals_hf(hf, device):
    model, m, V, _ = hf
    dev = ("--device", device)
    if V != 257:
        pytest.skip("andrea-generate writes bytes: V = 257 (bytes and BOS)")
    prompt = b"The cat sat"
    ours = run("generate", "-m", m, *dev, "--prompt", prompt.decode(), "-n",
               100, "--temperature", 0, check=0).stdout
    ids = torch.tensor([[256] + list(prompt)])
    with torch.no_grad():
        g = model.generate(ids, do_sample=False, max_new_tokens=100,
                           min_new_tokens=100, pad_token_id=0,
                           eos_token_id=None)
    theirs = g[0, ids.shape[1]:].tolist()
    k = next((i for i, t in enumerate(theirs) if t == 256), len(theirs))
    assert k >= 50  # BOS would end andrea's row
    assert list(ours[:k]) == theirs[:k]


@pytest.mark.parametrize("device", DEVICES)
def test_fine_tuning_the_imported_model_lowers_its_held_out_loss(hf, tmp_path,
                                                                 device):
    """andrea-train -m on the imported GPT-2 (biases, tied head): the
    held-out loss falls and the model written keeps GPT-2's form."""
    from test_forward_gpu import training_text
    _, m, V, _ = hf
    if V != 257:
        pytest.skip("text trains a byte model: V = 257")
    data = tmp_path / "data.txt"
    data.write_bytes(training_text()[:60000])
    log, out = tmp_path / "log.jsonl", tmp_path / "tuned.ats"
    run("train", "-m", m, "--data", data, "--steps", 100, "--batch", 8,
        "--seq", 64, "--lr", 3e-3, "--warmup", 5, "--eval-every", 10,
        "--eval-batches", 4, "--device", device, "--log", log, "-o", out,
        check=0, timeout=300)
    val = [json.loads(line)["val_loss"] for line in log.read_text().splitlines()
           if "val_loss" in line]
    print(device, "held-out loss", val)
    assert len(val) >= 3 and val[-1] < val[0] - 0.3, val
    names = set(unpack(tmp_path, out.read_bytes()))
    assert "layers.2.mlp.bfc" in names and "lm_head" not in names
