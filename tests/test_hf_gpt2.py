"""Imported GPT-2 against Hugging Face transformers itself (issue 16), where
PyTorch and transformers are installed (the GPU machine; make test-gpu runs
it): a random GPT2LMHeadModel, its biases drawn large enough to matter,
saved with save_pretrained and imported; its logits, one head's attention
(output_attentions, eager attention) and 100 greedy tokens against HF's;
then exported and loaded back by from_pretrained.  Skipped elsewhere."""
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
CPU = ("--device", "cpu")  # the GPU engine does not run biases yet


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


def test_logits_and_attention_equal_hf(hf, tmp_path):
    model, m, V, _ = hf
    tok = np.random.default_rng(V).integers(0, V, (2, 50)).astype(np.int32)
    s = pack(tmp_path, [("tokens", tok)])
    with torch.no_grad():
        ref = model(torch.tensor(tok, dtype=torch.long), output_attentions=True)
    out = unpack(tmp_path, pipeline([("embed", "-m", m),
                                     ("block", "-m", m, "-l", "all", *CPU),
                                     ("logits", "-m", m, *CPU)], input=s))
    assert rel(out["logits"], ref.logits.numpy()) <= TOL
    att = unpack(tmp_path, pipeline(
        [("embed", "-m", m), ("block", "-m", m, "-l", 0, *CPU),
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


def test_greedy_generation_equals_hf(hf):
    model, m, V, _ = hf
    if V != 257:
        pytest.skip("andrea-generate writes bytes: V = 257 (bytes and BOS)")
    prompt = b"The cat sat"
    ours = run("generate", "-m", m, *CPU, "--prompt", prompt.decode(), "-n",
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
