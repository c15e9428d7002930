/* pump.c - pipe reading ahead and writing behind on a thread (pump.h).
 *
 * The bytes travel in a list of blocks.  The side that fills a block
 * (the thread when reading, the caller when writing) writes past the
 * block's `len` without the lock and then raises `len` under it; the side
 * that empties it reads only below `len`, so neither waits on the other's
 * copying.  A block leaves the list when it is full and emptied, or empty
 * at the end, and goes to the free list.
 */
#include "stream/pump.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct block {
	struct block *next;
	size_t len, off; /* bytes filled; bytes emptied */
	unsigned char data[AT_PUMP_BLOCK];
} block;

struct at_pump {
	int fd, writing;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	block *head, *tail, *spare;
	int blocks;    /* allocated, in the list or spare */
	int done;      /* reading: the input ended; writing: no more to come */
	int err;       /* errno of the failed read or write, or 0 */
};

int at_is_pipe(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

/* A block for the tail of the list, appended, or NULL when AT_PUMP_BLOCKS
 * are allocated and none is spare (or malloc fails).  Under the lock. */
static block *append_block(at_pump *p)
{
	block *b = p->spare;
	if (b)
		p->spare = b->next;
	else if (p->blocks < AT_PUMP_BLOCKS && (b = malloc(sizeof *b)))
		p->blocks++;
	if (!b)
		return NULL;
	b->next = NULL;
	b->len = b->off = 0;
	if (p->tail)
		p->tail->next = b;
	else
		p->head = b;
	p->tail = b;
	return b;
}

/* 1 when b is emptied and no more will come into it. */
static int spent(const block *b)
{
	return b->off == b->len && (b->len == AT_PUMP_BLOCK || b->next);
}

/* Moves the emptied head block to the spare list.  Under the lock. */
static void retire_head(at_pump *p)
{
	block *b = p->head;
	p->head = b->next;
	if (!p->head)
		p->tail = NULL;
	b->next = p->spare;
	p->spare = b;
	pthread_cond_broadcast(&p->changed);
}

/* Reading: the tail block while it has room, or a new one; waits while
 * the backlog is full.  Under the lock. */
static block *room(at_pump *p)
{
	for (;;) {
		if (p->done) /* at_pump_free */
			return NULL;
		if (p->tail && p->tail->len < AT_PUMP_BLOCK)
			return p->tail;
		block *b = append_block(p);
		if (b)
			return b;
		if (p->blocks < AT_PUMP_BLOCKS) /* malloc failed */
			return NULL;
		pthread_cond_wait(&p->changed, &p->lock);
	}
}

static void *read_ahead(void *arg)
{
	at_pump *p = arg;
	pthread_setname_np(pthread_self(), "andrea-pump");
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		block *b = room(p);
		if (!b) {
			if (!p->done)
				p->err = ENOMEM;
			break;
		}
		size_t at = b->len;
		pthread_mutex_unlock(&p->lock);
		/* at_pump_free cancels the thread here, and only here */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		ssize_t n = read(p->fd, b->data + at, AT_PUMP_BLOCK - at);
		int e = errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		pthread_mutex_lock(&p->lock);
		if (n > 0) {
			b->len += (size_t)n;
			pthread_cond_broadcast(&p->changed);
		} else if (n < 0 && e == EINTR) {
			continue;
		} else {
			p->err = n < 0 ? e : 0;
			break;
		}
	}
	p->done = 1;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* The head block once it holds bytes not yet emptied, retiring spent
 * ones; NULL once p->done and none are left.  Under the lock. */
static block *filled(at_pump *p)
{
	for (;;) {
		block *b = p->head;
		if (b && spent(b))
			retire_head(p);
		else if (b && b->off < b->len)
			return b;
		else if (p->done)
			return NULL;
		else
			pthread_cond_wait(&p->changed, &p->lock);
	}
}

size_t at_pump_read(at_pump *p, void *buf, size_t n, int *err)
{
	unsigned char *out = buf;
	size_t got = 0;
	pthread_mutex_lock(&p->lock);
	while (got < n) {
		block *b = filled(p);
		if (!b)
			break;
		size_t k = b->len - b->off;
		if (k > n - got)
			k = n - got;
		pthread_mutex_unlock(&p->lock);
		memcpy(out + got, b->data + b->off, k);
		pthread_mutex_lock(&p->lock);
		b->off += k;
		got += k;
	}
	*err = got < n ? p->err : 0;
	pthread_mutex_unlock(&p->lock);
	return got;
}

static void *write_behind(void *arg)
{
	at_pump *p = arg;
	pthread_setname_np(pthread_self(), "andrea-pump");
	pthread_mutex_lock(&p->lock);
	for (;;) {
		block *b = filled(p);
		if (!b)
			break;
		size_t at = b->off, k = b->len - at;
		int failed = p->err;
		pthread_mutex_unlock(&p->lock);
		ssize_t n = failed ? (ssize_t)k : write(p->fd, b->data + at, k);
		int e = errno;
		pthread_mutex_lock(&p->lock);
		if (n < 0 && e == EINTR)
			continue;
		if (n < 0) { /* drop the rest; at_pump_write reports it */
			p->err = e;
			n = (ssize_t)k;
		}
		b->off += (size_t)n;
		pthread_cond_broadcast(&p->changed);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int at_pump_write(at_pump *p, const void *buf, size_t n)
{
	const unsigned char *in = buf;
	pthread_mutex_lock(&p->lock);
	while (n && !p->err) {
		block *b = p->tail && p->tail->len < AT_PUMP_BLOCK ? p->tail
								    : append_block(p);
		if (!b) {
			if (p->blocks < AT_PUMP_BLOCKS) {
				p->err = ENOMEM;
				break;
			}
			pthread_cond_wait(&p->changed, &p->lock);
			continue;
		}
		size_t at = b->len, k = AT_PUMP_BLOCK - at;
		if (k > n)
			k = n;
		pthread_mutex_unlock(&p->lock);
		memcpy(b->data + at, in, k);
		pthread_mutex_lock(&p->lock);
		b->len += k;
		in += k;
		n -= k;
		pthread_cond_broadcast(&p->changed);
	}
	int e = p->err;
	pthread_mutex_unlock(&p->lock);
	if (e)
		errno = e;
	return e ? -1 : 0;
}

int at_pump_flush(at_pump *p)
{
	pthread_mutex_lock(&p->lock);
	while (p->head && (p->head->off < p->head->len || p->head->next))
		pthread_cond_wait(&p->changed, &p->lock);
	int e = p->err;
	pthread_mutex_unlock(&p->lock);
	if (e)
		errno = e;
	return e ? -1 : 0;
}

static at_pump *start(int fd, int writing)
{
	at_pump *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->fd = fd;
	p->writing = writing;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->changed, NULL);
	if (pthread_create(&p->thread, NULL, writing ? write_behind : read_ahead,
			   p) != 0) {
		pthread_cond_destroy(&p->changed);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	return p;
}

at_pump *at_pump_reader(int fd)
{
	return start(fd, 0);
}

at_pump *at_pump_writer(int fd)
{
	return start(fd, 1);
}

void at_pump_free(at_pump *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->done = 1;
	pthread_cond_broadcast(&p->changed);
	pthread_mutex_unlock(&p->lock);
	if (!p->writing)
		pthread_cancel(p->thread); /* it may wait in read() for ever */
	pthread_join(p->thread, NULL);
	for (int list = 0; list < 2; list++) {
		block *b = list ? p->spare : p->head;
		while (b) {
			block *next = b->next;
			free(b);
			b = next;
		}
	}
	pthread_cond_destroy(&p->changed);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
