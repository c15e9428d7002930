"""The stage filters at the edges of their input: attributes that do not
parse or disagree, sizes past what int or the byte cap hold (tensors of
no elements whose other sizes are vast), outputs far larger than their
inputs, and the non-finite values NumPy's arithmetic keeps."""
import numpy as np
import pytest

import atsfmt
from conftest import run, one_line_error
from stagekit import pack, unpack


def header_only(*records):
    """A stream of (name, dims) records of no data: shapes with a zero."""
    return atsfmt.stream(*(atsfmt.record(n, "f32", d, b"") for n, d in records))


def test_attend_takes_only_a_layer_number_from_attn(tmp_path):
    """--proj's layer comes from attn's attribute: one that is no layer
    number (-1, 1x, past int) is an error, not layer 0 or an invented
    matrix."""
    rng = np.random.default_rng(1)
    a = rng.random((1, 12, 3, 3)).astype(np.float32)
    v = rng.standard_normal((1, 12, 3, 64)).astype(np.float32)
    for layer in ("-1", "1x", "4294967297"):
        p = run("attend", "--proj", check=1, input=pack(
            tmp_path, [("v", v), ("attn", a / a.sum(-1, keepdims=True))],
            [f"attn:layer={layer}"]))
        assert f"record 2 'attn': layer={layer}: not a layer number" in \
            one_line_error(p, "attend")


def test_attention_holds_k_and_v_to_one_head(tmp_path):
    q = np.ones((1, 1, 3, 4), np.float32)
    p = run("attention", check=1, input=pack(
        tmp_path, [("q", q), ("k", q), ("v", q)], ["k:layer=0", "v:layer=1"]))
    assert "record 3 'v': layer=1 but k has layer=0" in \
        one_line_error(p, "attention")


@pytest.mark.parametrize("tool,records,says", [
    ("scores", [("q", (1, 1, 1 << 32, 0)), ("k", (1, 1, 1 << 32, 0))],
     "record 1 'q': shape [1,1,4294967296,0]: a size above 2147483647"),
    ("qkv", [("x", ((1 << 31) + 5, 0, 768))],
     "record 1 'x': shape [2147483653,0,768]: a size above 2147483647"),
    ("scores", [("q", (1, 1, (1 << 31) - 1, 0)), ("k", (1, 1, (1 << 31) - 1, 0))],
     "its scores [1,1,2147483647,2147483647] would pass the cap"),
    ("attend", [("v", (1, 1, 100000, 0)), ("attn", (1, 1, 100000, 100000))],
     "record 2 'attn': tensor of 40000000000 bytes exceeds the cap"),
    ("scores", [("q", (1 << 16, 1 << 16, 1, 0)), ("k", (1 << 16, 1 << 16, 1, 0))],
     "record 1 'q': B*H=4294967296 heads is more than this tool handles"),
    ("attend", [("v", (1 << 16, 1 << 16, 0, 0)), ("attn", (1 << 16, 1 << 16, 0, 0))],
     "record 2 'attn': B*H=4294967296 heads is more than this tool handles"),
    ("qkv", [("x", (1 << 16, 1 << 16, 0))],
     "record 1 'x': B*T=4294967296 rows is more than this tool handles"),
    ("softmax", [("scores", (0, 1 << 31))],
     "record 1 'scores': T=2147483648 keys a row is more than this tool"),
    ("mask", [("scores", (1 << 16, 1 << 16, 0, 0))],
     "record 1 'scores': B*H=4294967296 T x T matrices is more than"),
])
def test_vast_sizes_are_refused_at_once(tool, records, says):
    """A tensor of no elements passes the byte cap whatever its other
    sizes: those past int, products of them past int that the ops count
    in int (B*H heads, B*T rows, the matrices to mask), an output past
    the cap, or a record read a head at a time past it, are refused (they
    gave wrong shapes, a hang, an endless stream of zeros, a bare 'out of
    memory'; with data, heads or rows past int wrapped: wrong results, or
    on the GPU writes out of bounds)."""
    p = run(tool, "--no-scale" if tool == "scores" else "--keep",
            input=header_only(*records), check=1, timeout=20)
    assert says in one_line_error(p, tool)


def test_embed_checks_its_tokens_before_making_x(tmp_path):
    """T = 0 is refused before --bos makes it 1, an x past the cap is
    refused before it is made, and a malformed lengths attribute is
    refused with or without --bos."""
    p = run("embed", "--bos", check=1,
            input=pack(tmp_path, [("tokens", np.zeros((1 << 20, 0), np.int32))]))
    assert "no tokens to embed (T = 0)" in one_line_error(p, "embed")
    p = run("embed", "--bos", check=1,
            input=pack(tmp_path, [("tokens", np.zeros((1 << 22, 1), np.int32))]))
    assert "its x [4194304,2,768] would pass the cap" in \
        one_line_error(p, "embed")
    t = np.ones((2, 3), np.int32)
    for bos in ([], ["--bos"]):
        p = run("embed", *bos, check=1,
                input=pack(tmp_path, [("tokens", t)], ["tokens:lengths=abc"]))
        assert "lengths=abc: expected 2 lengths of 1 to 3" in \
            one_line_error(p, "embed")


def test_attention_of_heads_of_no_values_is_immediate(tmp_path):
    """D = 0: out holds nothing and lse is the log of the keys each query
    sees (every score 0), at once for any T (it was O(T^2))."""
    z = np.zeros((1, 2, 5, 0), np.float32)
    for mask, want in (([], np.log(np.arange(1, 6))), (["--no-mask"],
                                                        np.full(5, np.log(5)))):
        out = unpack(tmp_path, run("attention", "--no-scale", "--lse", *mask,
                                   input=pack(tmp_path, [("q", z), ("k", z),
                                                         ("v", z)]),
                                   check=0).stdout)
        assert out["out"].shape == (1, 2, 5, 0)
        assert np.allclose(out["lse"], np.broadcast_to(want, (1, 2, 5)),
                           rtol=1e-6)
    big = header_only(("q", (1, 1, 1 << 20, 0)), ("k", (1, 1, 1 << 20, 0)),
                      ("v", (1, 1, 1 << 20, 0)))
    run("attention", "--no-scale", input=big, check=0, timeout=10)


@pytest.mark.parametrize("dims,env,says", [
    ((1, 1, 2048, 0), {"ANDREA_MAX_BYTES": "4096"},
     "record 1 'q': its lse [1,1,2048] would pass the cap of 4096 bytes"),
    ((65536, 65536, 1, 0), {"ANDREA_MAX_BYTES": str(1 << 40)},
     "record 1 'q': B*H=4294967296 heads is more than this tool handles"),
])
def test_attention_refuses_an_lse_it_cannot_make(dims, env, says):
    """Heads of no values pass the byte cap at any size, but their lse of
    B*H*T floats need not: one past the cap was made anyway (16 GiB, 'out
    of memory', or a record the next reader refuses), and B*H past int
    wrapped (an lse of zeros where log T belongs)."""
    p = run("attention", "--no-scale", "--lse", check=1, timeout=20,
            env=env, input=header_only(*((n, dims) for n in "qkv")))
    assert says in one_line_error(p, "attention")


def test_a_zero_scale_keeps_the_nan_of_an_infinity(tmp_path):
    """--scale 0 times a dot product of inf is NaN, as NumPy has it (BLAS
    forms no product for a zero alpha, which gave 0)."""
    q = np.ones((1, 1, 3, 4), np.float32)
    q[0, 0, 1, 2] = np.inf
    with np.errstate(invalid="ignore"):
        want = np.float32(0) * (q[0, 0] @ q[0, 0].T)
    for scale in ("0", "-0"):
        got = unpack(tmp_path, run("scores", "--scale", scale, check=0,
                                   input=pack(tmp_path, [("q", q), ("k", q)])
                                   ).stdout)["scores"][0, 0]
        assert np.array_equal(np.isnan(got), np.isnan(want))
        zeros = got[~np.isnan(got)]
        assert np.all(zeros == 0) and \
            np.all(np.signbit(zeros) == scale.startswith("-"))


@pytest.mark.parametrize("T", [200, 300, 600])
def test_a_nan_in_v_reaches_every_row_as_numpy_has_it(tmp_path, T):
    """The causal product attn @ v skips the zero blocks above the
    diagonal (from T = 256 on; T = 200 is the plain product, for
    comparison) only where v is finite: 0 x NaN is NaN, so a NaN in the
    last value reaches every row (at T >= 256 it reached some)."""
    rng = np.random.default_rng(T)
    a = np.tril(rng.random((1, 1, T, T))).astype(np.float32)
    v = rng.standard_normal((1, 1, T, 8)).astype(np.float32)
    v[0, 0, -1, 0] = np.nan
    got = unpack(tmp_path, run("attend", check=0, input=pack(
        tmp_path, [("attn", a), ("v", v)], ["attn:mask=causal"])).stdout)["out"]
    want = a[0, 0].astype(np.float64) @ v[0, 0]
    assert np.array_equal(np.isnan(got[0, 0]), np.isnan(want))
    fin = ~np.isnan(want)
    assert np.allclose(got[0, 0][fin], want[fin], rtol=1e-5, atol=1e-5)


def test_a_head_or_layer_past_the_model_is_status_1():
    x = run("embed", "--text", input=b"the cat", check=0).stdout
    for opt, says in ((["--head", 2000000], "the model has 12 heads"),
                      (["-l", 2000000], "the model has 12 layers")):
        p = run("qkv", *opt, input=x, check=1)
        assert says in one_line_error(p, "qkv")


@pytest.mark.parametrize("j", [100, 300, 599])
def test_the_fused_attention_keeps_a_nan_to_the_blocks_that_see_it(tmp_path, j):
    """andrea-attention's rows before the tile of 64 queries that holds a
    NaN in v never multiply it (its page: the rows that see it, and those
    before it from row 64 x floor(j/64) on; the page said those of its
    block of keys, 256 on the CPU, whose first rows stay finite)."""
    T = 600
    rng = np.random.default_rng(6)
    q = rng.standard_normal((1, 1, T, 8)).astype(np.float32)
    v = q.copy()
    v[0, 0, j, 0] = np.nan
    out = unpack(tmp_path, run("attention", check=0, input=pack(
        tmp_path, [("q", q), ("k", q), ("v", v)])).stdout)["out"][0, 0]
    assert np.isfinite(out[:j // 64 * 64]).all()
    assert np.isnan(out[j // 64 * 64:, 0]).all()
    assert np.isfinite(out[:, 1:]).all()


def test_a_lengths_attribute_of_more_rows_than_it_can_list_is_refused(tmp_path):
    """No attribute value lists the lengths of 128 rows or more: one on
    such a batch is malformed, and logits --last says so (it took every
    row as whole)."""
    x = np.zeros((130, 2, 768), np.float32)
    p = run("logits", "--last", check=1,
            input=pack(tmp_path, [("x", x)], ["x:lengths=2,1"]))
    assert "lengths=2,1: 130 rows are more than the attribute can list" in \
        one_line_error(p, "logits")
