"""Independent float64 NumPy reference for the andrea stages.

Nothing here calls andrea code: the seeded generator is re-implemented from
its specification in man/man5/andrea-model.5 (Philox4x32-10, FNV-1a name
hash, Box-Muller), and every op is written out in float64.
"""
import numpy as np

MASK32 = np.uint64(0xFFFFFFFF)
PRESETS = {
    "tiny": dict(n_layer=2, n_head=4, d_model=64, ctx=128, vocab=257),
    "andrea-120m": dict(n_layer=12, n_head=12, d_model=768, ctx=1024, vocab=257),
}


def philox4x32(ctr, key):
    """ctr: 4 arrays of 32-bit values; key: 2 ints.  Returns 4 arrays."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in ctr)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & MASK32)
        k0 = (k0 + np.uint64(0x9E3779B9)) & MASK32
        k1 = (k1 + np.uint64(0xBB67AE85)) & MASK32
    return c0, c1, c2, c3


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def seeded_normal(seed, name, shape, std=0.02):
    n = int(np.prod(shape))
    k = seed ^ fnv1a64(name)
    blocks = (n + 3) // 4
    b = np.arange(blocks, dtype=np.uint64)
    r = philox4x32((b & MASK32, b >> np.uint64(32), 0 * b, 0 * b),
                   (k & 0xFFFFFFFF, k >> 32))
    u = [(x.astype(np.float64) + 1.0) / 4294967296.0 for x in r]
    z = np.empty((blocks, 4))
    for j in (0, 2):
        radius = np.sqrt(-2.0 * np.log(u[j]))
        theta = 2.0 * np.pi * u[j + 1]
        z[:, j] = radius * np.cos(theta)
        z[:, j + 1] = radius * np.sin(theta)
    return (std * z.reshape(-1)[:n]).astype(np.float32).reshape(shape)


def seeded_param(seed, name, shape):
    if name.endswith(".weight"):
        return np.ones(shape, np.float32)
    if name.endswith(".bias"):
        return np.zeros(shape, np.float32)
    return seeded_normal(seed, name, shape)


def embed(tokens, wte, wpe):
    T = tokens.shape[-1]
    return wte.astype(np.float64)[tokens] + wpe.astype(np.float64)[:T]


def layernorm(x, w, b, eps=1e-5):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def split_heads(x, H):
    B, T, C = x.shape
    return x.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * D)


def product(h, p, w, b):
    """h . p[w] (+ p[b], a bias the model may lack), in float64."""
    y = np.asarray(h, np.float64) @ p[w].astype(np.float64)
    return y + p[b].astype(np.float64) if b in p else y


def qkv(x, p, layer, H, norm=True):
    """p maps parameter names to arrays.  Returns q, k, v as [B,H,T,D]."""
    pre = f"layers.{layer}."
    h = layernorm(x, p[pre + "ln1.weight"], p[pre + "ln1.bias"]) if norm \
        else x.astype(np.float64)
    return tuple(split_heads(product(h, p, pre + "attn.w" + m,
                                     pre + "attn.b" + m), H)
                 for m in "qkv")


def scores(q, k, scale=None):
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    return (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)) \
        * scale


def mask(s, fill=-np.inf):
    s = np.array(s, dtype=np.float64)
    T = s.shape[-1]
    s[..., np.triu(np.ones((T, T), bool), k=1)] = fill
    return s


def softmax(s):
    s = s.astype(np.float64)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(-1, keepdims=True)


def attend(a, v):
    return a.astype(np.float64) @ v.astype(np.float64)


def rel_err(out, ref):
    """||out - ref|| / ||ref|| over the finite entries of ref."""
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    fin = np.isfinite(ref)
    assert np.array_equal(np.isfinite(out), fin), "non-finite entries differ"
    den = np.linalg.norm(ref[fin])
    num = np.linalg.norm(out[fin] - ref[fin])
    return num / den if den > 0 else num


# ---- the rest of the model: MLP, whole blocks, head, greedy decoding ----

def gelu(x):
    """GELU, tanh form, in float64."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def attention(x, p, layer, H):
    """concat over heads of causal softmax(QK^T/sqrt D) V, times Wo."""
    q, k, v = qkv(x, p, layer, H)
    a = softmax(mask(scores(q, k)))
    pre = f"layers.{layer}."
    return product(merge_heads(attend(a, v)), p, pre + "attn.wo",
                   pre + "attn.bo")


def block(x, p, layer, H):
    """One pre-norm block on x [B,T,C]: x + Attn(LN1 x), then + MLP(LN2 x)."""
    pre = f"layers.{layer}."
    x = np.asarray(x, np.float64) + attention(x, p, layer, H)
    h = layernorm(x, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
    f = gelu(product(h, p, pre + "mlp.fc", pre + "mlp.bfc"))
    return x + product(f, p, pre + "mlp.proj", pre + "mlp.bproj")


def logits(x, p):
    """LNf(x) . lm_head, or . wte^T where there is no lm_head (tied)."""
    head = p["lm_head"] if "lm_head" in p else p["wte"].T
    return layernorm(x, p["lnf.weight"], p["lnf.bias"]) \
        @ head.astype(np.float64)


def forward(tokens, p, L, H):
    """Logits [B,T,V] of the whole model on tokens [B,T]."""
    x = embed(tokens, p["wte"], p["wpe"])
    for layer in range(L):
        x = block(x, p, layer, H)
    return logits(x, p)


def window_start(n, w0, ctx):
    """Where andrea-generate's window starts for a sequence of n tokens
    whose window started at w0: where the n tokens no longer fit in ctx,
    the newest ctx // 2 are kept (andrea-generate(1))."""
    if n - w0 > ctx:
        w0 = n - max(ctx // 2, 1)
    return w0


def greedy(prompt, p, L, H, ctx, n, bos=256):
    """andrea-generate --temperature 0: BOS + prompt bytes (the last ctx of
    them), then n argmax steps over the window; a token >= 256 ends the
    text.  Returns (bytes, the logit margin of each step's choice)."""
    seq, out, margins = [bos] + list(prompt), [], []
    w0 = max(len(seq) - ctx, 0)
    for _ in range(n):
        w0 = window_start(len(seq), w0, ctx)
        lg = forward(np.array([seq[w0:]]), p, L, H)[0, -1]
        tok = int(np.argmax(lg))
        margins.append(lg[tok] - np.partition(lg, -2)[-2])
        if tok >= 256:
            break
        seq.append(tok)
        out.append(tok)
    return bytes(out), margins


def sample_uniform(seed, n, row=0):
    """Draw n of row `row` of andrea-generate (lib/ops/sample.h):
    Philox4x32-10 of counter (n lo, n hi, row, 0) under key
    seed ^ FNV-1a('sample'); u from 53 bits."""
    k = seed ^ fnv1a64("sample")
    r = philox4x32(([n & 0xFFFFFFFF], [n >> 32], [row], [0]),
                   (k & 0xFFFFFFFF, k >> 32))
    r0, r1 = int(r[0][0]), int(r[1][0])
    return ((r0 << 21) | (r1 >> 11)) / 2.0 ** 53


def sample(lg, temperature, top_k, u, top_p=1.0):
    """The documented draw: top-k by (logit desc, id asc), then the fewest
    of those, most probable first, whose probability reaches top_p;
    weights exp((l - max)/temperature), first kept id (increasing) whose
    running sum exceeds u * total."""
    lg = np.asarray(lg, np.float64)
    if temperature == 0 or top_k == 1:
        return int(np.argmax(lg))
    order = np.lexsort((np.arange(len(lg)), -lg))
    if 0 < top_k < len(lg):
        order = order[:top_k]
    if top_p < 1:
        w = np.exp((lg[order] - lg.max()) / temperature)
        run = np.cumsum(w)
        keep = int(np.searchsorted(run, top_p * w.sum())) + 1
        order = order[:min(keep, len(order))]
    ids = np.sort(order)
    w = np.exp((lg[ids] - lg.max()) / temperature)
    run = np.cumsum(w)
    hit = np.nonzero(run > u * w.sum())[0]
    return int(ids[hit[0]] if len(hit) else ids[-1])