/* train.h - the training engine behind andrea-train.
 *
 * One flat float buffer holds every parameter of an ANDREA model in the
 * order of andrea-model(5) (wte, wpe, the layers, lnf, lm_head); gradients
 * and the two AdamW moments share its layout.  The forward pass is the
 * stages' own (ops/prenorm.h) and caches what the backward pass needs.
 * Shape letters as in docs/ARCHITECTURE.md: B T C H D V L F.
 */
#ifndef ANDREA_TRAIN_H
#define ANDREA_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "ops/forward.h"
#include "ops/precision.h"

#define TR_NAME 64

/* How the GPU engine computes the attention: fused (no T x T weights;
 * cuDNN's flash attention in bf16) where it can, or always or never. */
enum { TR_ATTN_AUTO, TR_ATTN_FUSED, TR_ATTN_EXPLICIT };

typedef struct {
	char name[TR_NAME];
	int rank;
	uint64_t dims[2];
	size_t off, n; /* offset and element count in the flat buffers */
	int decay;     /* weight decay applies (the product matrices) */
} tr_param;

/* Offsets of one layer's parameters in the flat buffer (the six biases
 * only in a model with them). */
typedef struct {
	size_t ln1w, ln1b, wq, wk, wv, wo, ln2w, ln2b, fc, proj;
	size_t bq, bk, bv, bo, bfc, bproj;
} tr_layer_off;

/* The activations of one forward pass, cached for the backward pass.
 * Per layer l: arrays indexed [l] of the sizes in the comments. */
typedef struct {
	int B, T;        /* the sizes the buffers were made for */
	float *resid;    /* (L+1) x [BT,C]: embedding, then each block's output */
	float *ln1, *ln2;            /* L x [BT,C] */
	float *ln1_mean, *ln1_rstd;  /* L x [BT] */
	float *ln2_mean, *ln2_rstd;
	float *q, *k, *v, *out;      /* L x [B,H,T,D] */
	float *att;                  /* L x [B,H,T,T] softmax weights */
	float *y;                    /* L x [BT,C] after Wo */
	float *xmid;                 /* L x [BT,C] after the attention residual */
	float *fc, *gelu;            /* L x [BT,F] before and after GELU */
	float *lnf, *lnf_mean, *lnf_rstd; /* [BT,C], [BT], [BT] */
	float *logits;               /* [BT,V] */
	float *probs;                /* [BT,V] softmax of the logits */
	float *scratch;              /* [B,H,T,T] scores, or [BT,F] */
	float *losses;               /* [BT] per-position loss */
	/* backward scratch */
	float *d_resid, *d_ln, *d_tmp, *d_q, *d_k, *d_v, *d_merged; /* [BT,C] */
	float *d_fc;                 /* [BT,F] */
	float *d_att;                /* [B,H,T,T] */
} tr_acts;

typedef struct {
	at_config cfg;
	int n_params;
	tr_param *params;
	tr_layer_off *layer;  /* cfg.n_layer entries */
	size_t wte, wpe, lnfw, lnfb, lm_head; /* lm_head: not in a tied model */
	int biases;           /* the six products' biases (GPT-2's) */
	int tied;             /* no lm_head: the head is wte^T */
	size_t total;         /* floats in each flat buffer */
	float *p, *g;         /* parameters and gradients */
	tr_acts a;
	at_tokenizer *tok;    /* the model file's tokenizer; NULL: bytes */
} tr_model;

/* Lays out the parameters of cfg, with the products' biases where biases
 * and without lm_head where tied (andrea-model(5)), and allocates p and g
 * (zeroed).  Returns 0, or -1 when out of memory. */
int tr_model_init(tr_model *m, const at_config *cfg, int biases, int tied);
void tr_model_free(tr_model *m);

/* Fills p from the seeded default generator (philox.h) exactly as
 * at_model_param does for a seeded model: LN weights 1, biases 0, the rest
 * N(0, 0.02^2) by name under seed. */
void tr_model_seed(tr_model *m, uint64_t seed);
/* Loads every parameter from an opened model file; shapes must match. */
int tr_model_load(tr_model *m, const at_model *src, char *err, size_t errlen);
/* Writes (with config) a config record, then every tensor of buf in the
 * parameter layout, named prefix + parameter name, to w (not finished). */
int tr_model_write(const tr_model *m, struct at_writer *w, int config,
		   const char *prefix, const float *buf);

/* The weights of m->p as the forward engine takes them (ops/forward.h),
 * with layers (cfg.n_layer entries) filled and used. */
void tr_model_weights(const tr_model *m, at_weights *w, at_block_w *layers);
/* Layer l's weights in m->p. */
void tr_layer_weights(const tr_model *m, int l, at_block_w *w);

/* Makes the activation buffers for batches of B rows of T positions.
 * Returns 0, or -1 when out of memory. */
int tr_acts_alloc(tr_model *m, int B, int T);

/* The forward pass over inputs [B,T]; with targets [B,T] it also returns
 * the mean cross-entropy in nats (else NAN) and leaves the softmax of the
 * logits in a.probs.  B and T must not exceed the sizes allocated. */
double tr_forward(tr_model *m, const int32_t *inputs, const int32_t *targets,
		  int B, int T);
/* The backward pass of the last forward (with targets): overwrites g with
 * the gradient of the mean loss. */
void tr_backward(tr_model *m, const int32_t *inputs, const int32_t *targets,
		 int B, int T);

/* Backward ops (backward_ops.c).  Row-major float32; each overwrites its
 * outputs unless it says it accumulates. */
/* dx[N,C] += LN backward of dout; dw, db [C] = the sums over rows. */
void tr_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
			   const float *in, const float *w, const float *mean,
			   const float *rstd, int N, int C);
/* db [C] = the sums over rows of dout [N,C]: a product's bias gradient. */
void tr_bias_backward(float *db, const float *dout, int N, int C);
/* dwte, dwpe (zeroed here) from dx [B,T,C]. */
void tr_embed_backward(float *dwte, float *dwpe, const float *dx,
		       const int32_t *tokens, int B, int T, int C, int V);
/* din[n] = dout[n] * GELU'(in[n]) (tanh form). */
void tr_gelu_backward(float *din, const float *in, const float *dout,
		      size_t n);
/* Causal attention backward for BH heads: from dout [BH,T,D], the weights
 * att and q, k, v, makes dq, dk, dv [BH,T,D]; datt [BH,T,T] is scratch. */
void tr_attention_backward(float *dq, float *dk, float *dv, float *datt,
			   const float *dout, const float *att, const float *q,
			   const float *k, const float *v, int BH, int T, int D,
			   float scale);
/* Softmax cross-entropy of logits [N,V] against targets: probs, per-row
 * losses in nats; returns their mean. */
double tr_crossentropy_forward(float *probs, float *losses, const float *logits,
			       const int32_t *targets, int N, int V);
/* dlogits [N,V] = (probs - onehot(target)) / N. */
void tr_crossentropy_backward(float *dlogits, const float *probs,
			      const int32_t *targets, int N, int V);


/* AdamW and the schedule (adamw.c). */
typedef struct {
	double lr, min_lr, beta1, beta2, eps, weight_decay, clip;
	long warmup, steps;
} tr_hparams;

/* The learning rate of step s (0-based): linear warmup over `warmup`
 * steps to lr, then cosine decay to min_lr at step `steps`. */
double tr_lr_at(const tr_hparams *h, long s);
/* The L2 norm of all gradients, summed in a fixed order. */
double tr_grad_norm(const float *g, size_t n);
/* One AdamW update (step t counts from 1) with gradients scaled by gscale
 * (the clipping factor), on every parameter of m. */
void tr_adamw_update(tr_model *m, float *mom1, float *mom2, const tr_hparams *h,
		     double lr, long t, double gscale);

/* Training data (data.c): every token of the input in one array,
 * the last part held out for evaluation. */
typedef struct {
	int32_t *tok;
	size_t n, n_train;  /* all tokens; the first n_train are for training */
	uint64_t size;      /* tokens, for the resume check */
	uint32_t crc;       /* CRC-32 of the tokens as little-endian i32 */
	int record;         /* the index of the `tokens` record they came
			       from; 0: from text */
} tr_data;

/* Reads path: an andrea stream holding a `tokens` record (i32, any
 * shape, flattened; a padded batch's rows without their padding), or
 * else text, encoded by tok (NULL: the byte
 * tokenizer, one token a byte).  Checks every id against vocab and that
 * both splits hold a window of T+1 tokens (the held-out split only when
 * val_fraction > 0).  Returns 0 or -1 with err. */
int tr_data_load(tr_data *d, const char *path, at_tokenizer *tok, int vocab,
		 double val_fraction, int T, const at_read_opts *ro, char *err,
		 size_t errlen);
void tr_data_free(tr_data *d);
/* Rows first .. first + rows - 1 of the training batch of step s
 * (0-based), into rows 0 .. rows - 1 of inputs and targets [rows,T]:
 * row b is the window of T+1 tokens starting at a position drawn from
 * Philox under (seed, s, b), whatever the rows around it (so a rank of a
 * data-parallel run draws its slice alone, dist.h). */
void tr_data_train_batch(const tr_data *d, uint64_t seed, long s, int first,
			 int rows, int T, int32_t *inputs, int32_t *targets);
/* Rows first .. first + rows - 1 of held-out batch i of n, each of B
 * rows: the n*B windows are spread evenly over the held-out split, the
 * same ones at every evaluation. */
void tr_data_val_batch(const tr_data *d, int i, int n, int B, int first,
		       int rows, int T, int32_t *inputs, int32_t *targets);

/* The resumable state of a run (checkpoint.c). */
typedef struct {
	long step;           /* steps done */
	uint64_t seed;
	int batch, seq;
	double val_fraction;
	uint64_t data_size;
	uint32_t data_crc;
	tr_hparams h;
	int biases, tied;    /* the model's form, for tr_model_init */
	long eval_every, eval_batches; /* the evaluation's; -1: not kept */
	int min_lr_given;    /* --min-lr was given; else it is a tenth of lr */
} tr_state;

/* Writes the gradients of one step (--dump-grads): a `tokens` record
 * [B,T+1] of the batch's windows (inputs and the last target) with the
 * step's loss and number as attributes, then g in the parameter layout,
 * to w (not finished).  Returns 0, or -1 with the reason in w->err. */
int tr_grads_write(struct at_writer *w, const tr_model *m,
		   const int32_t *inputs, const int32_t *targets, int B, int T,
		   double loss, long step);
/* Writes the checkpoint stream: a `train_state` record (the state in its
 * attributes), the `config` record, the parameters, the AdamW moments as
 * adam.m.NAME and adam.v.NAME, then the model's tokenizer if it has one. */
int tr_checkpoint_write(struct at_writer *w, const tr_model *m,
			const float *mom1, const float *mom2,
			const tr_state *st);
/* Reads the first two records of a checkpoint (state and config) from an
 * open reader; returns 0 or -1 with err. */
int tr_checkpoint_read_head(struct at_reader *r, tr_state *st,
			    at_config *cfg, char *err, size_t errlen);
/* Reads the rest into m (laid out for the config read; its tokenizer into
 * m->tok) and the moments, requiring every record in the order written,
 * with its shape. */
int tr_checkpoint_read_body(struct at_reader *r, tr_model *m, float *mom1,
			    float *mom2, char *err, size_t errlen);

#endif
