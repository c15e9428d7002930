/* rendezvous.c - the ranks' rendezvous (rendezvous.h): a file or a TCP
 * socket carrying one small checked message from rank 0 to the others. */
#include "train/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/le.h"

static const char MAGIC[8] = {'a', 'n', 'd', 'r', 'R', 'D', 'V', '1'};
static const char HELLO[8] = {'a', 'n', 'd', 'r', 'H', 'E', 'L', '1'};
#define POLL_MS 50 /* how often a waiting rank looks again */

void tr_rdv_encode(unsigned char msg[TR_RDV_MSG], int world,
		   const unsigned char id[TR_ID_BYTES])
{
	memcpy(msg, MAGIC, 8);
	put32(msg + 8, (uint32_t)world);
	memcpy(msg + 12, id, TR_ID_BYTES);
	put32(msg + 12 + TR_ID_BYTES,
	      (uint32_t)crc32(0L, msg, 12 + TR_ID_BYTES));
}

void tr_rdv_hello(unsigned char hello[TR_RDV_HELLO], int world, int rank)
{
	memcpy(hello, HELLO, 8);
	put32(hello + 8, (uint32_t)world);
	put32(hello + 12, (uint32_t)rank);
}

int tr_rdv_hello_rank(const unsigned char *hello, size_t n, int world)
{
	if (n != TR_RDV_HELLO || memcmp(hello, HELLO, 8) ||
	    le32(hello + 8) != (uint32_t)world)
		return -1;
	uint32_t r = le32(hello + 12);
	return r >= 1 && r < (uint32_t)world ? (int)r : -1;
}

int tr_rdv_decode(const unsigned char *msg, size_t n, int world,
		  const char *from, unsigned char id[TR_ID_BYTES], char *err,
		  size_t errlen)
{
	if (n != TR_RDV_MSG || memcmp(msg, MAGIC, 8)) {
		snprintf(err, errlen, "%s: not a rendezvous message of andrea's "
			 "(%zu bytes)", from, n);
		return -1;
	}
	if (le32(msg + 12 + TR_ID_BYTES) !=
	    (uint32_t)crc32(0L, msg, 12 + TR_ID_BYTES)) {
		snprintf(err, errlen, "%s: the rendezvous message is damaged "
			 "(CRC mismatch)", from);
		return -1;
	}
	uint32_t w = le32(msg + 8);
	if (w != (uint32_t)world) {
		snprintf(err, errlen, "%s: the message is for a run of %u ranks, "
			 "not %d (left by another run?)", from, w, world);
		return -1;
	}
	memcpy(id, msg + 12, TR_ID_BYTES);
	return 0;
}

/* Milliseconds left before deadline, at least 0. */
static int ms_left(double deadline)
{
	double s = deadline - at_now();
	return s > 0 ? (int)(s * 1000) + 1 : 0;
}

/* ---- file:PATH ---- */

static int file_publish(const char *path, const unsigned char *msg,
			char *err, size_t errlen)
{
	at_afile a; /* the other ranks never see half a message */
	char why[300];
	if (at_afile_open(&a, path) < 0) {
		snprintf(why, sizeof why, "%s", strerror(errno));
	} else if (fwrite(msg, 1, TR_RDV_MSG, a.f) != TR_RDV_MSG) {
		snprintf(why, sizeof why, "write error: %s", strerror(errno));
		at_afile_abort(&a);
	} else if (at_afile_commit(&a, why, sizeof why) == 0) {
		return 0;
	}
	snprintf(err, errlen, "%s: cannot write the rendezvous file: %s", path,
		 why);
	return -1;
}

static int file_wait(const char *path, int world, unsigned char *id,
		     double deadline, double timeout_s, char *err,
		     size_t errlen)
{
	for (;;) {
		FILE *f = fopen(path, "rb");
		if (f) {
			unsigned char msg[TR_RDV_MSG + 1];
			size_t n = fread(msg, 1, sizeof msg, f);
			fclose(f);
			return tr_rdv_decode(msg, n, world, path, id, err, errlen);
		}
		if (errno != ENOENT) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return -1;
		}
		if (!ms_left(deadline)) {
			snprintf(err, errlen, "%s: rank 0 wrote no rendezvous file "
				 "within %g s", path, timeout_s);
			return -1;
		}
		poll(NULL, 0, POLL_MS);
	}
}

/* ---- tcp://HOST:PORT ---- */

/* Splits "HOST:PORT" (HOST may be "[v6]") into host and port. */
static int split_address(const char *a, char *host, size_t hl, char *port,
			 size_t pl)
{
	const char *colon = strrchr(a, ':');
	if (!colon || colon == a || !colon[1])
		return -1;
	const char *h = a, *he = colon;
	if (*h == '[' && he[-1] == ']')
		h++, he--;
	if ((size_t)(he - h) >= hl || strlen(colon + 1) >= pl)
		return -1;
	memcpy(host, h, he - h);
	host[he - h] = 0;
	strcpy(port, colon + 1);
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	return 0;
}

/* Reads n bytes into buf from fd by the deadline; how many came. */
static size_t recv_all(int fd, unsigned char *buf, size_t n, double deadline)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, ms_left(deadline)) <= 0)
			break;
		ssize_t r = recv(fd, buf + got, n - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Writes all n bytes of buf to fd by the deadline; 0 or -1. */
static int send_all(int fd, const unsigned char *buf, size_t n,
		    double deadline)
{
	while (n) {
		struct pollfd p = {fd, POLLOUT, 0};
		if (poll(&p, 1, ms_left(deadline)) <= 0)
			return -1;
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		buf += w, n -= (size_t)w;
	}
	return 0;
}

static int tcp_serve(const char *where, const char *port, int world,
		     const unsigned char *msg, double deadline,
		     double timeout_s, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *ai = NULL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE; /* every address of this host */
	int fd = -1, rc = getaddrinfo(NULL, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "%s: %s", where, gai_strerror(rc));
		return -1;
	}
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
			    a->ai_protocol);
		int one = 1;
		if (fd >= 0 &&
		    (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
		     bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, world))) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot listen on port %s: %s", where,
			 port, strerror(errno));
		return -1;
	}
	/* each rank once, and only those that say which they are */
	char *seen = calloc((size_t)world, 1);
	int served = 0;
	while (seen && served < world - 1) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, ms_left(deadline)) <= 0)
			break;
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		unsigned char hello[TR_RDV_HELLO];
		double by = at_now() + 5.0 < deadline ? at_now() + 5.0 : deadline;
		size_t n = recv_all(c, hello, sizeof hello, by);
		int r = tr_rdv_hello_rank(hello, n, world);
		if (r > 0 && send_all(c, msg, TR_RDV_MSG, deadline) == 0 && !seen[r]) {
			seen[r] = 1;
			served++;
		}
		close(c);
	}
	free(seen);
	close(fd);
	if (served < world - 1) {
		snprintf(err, errlen, "%s: %d of the %d other ranks came within "
			 "%g s", where, served, world - 1, timeout_s);
		return -1;
	}
	return 0;
}

/* One try at connecting to host:port and reading the message; 1 when
 * there was nobody to connect to yet (try again), 0 or -1 otherwise. */
static int tcp_fetch_once(const char *where, const char *host,
			  const char *port, int rank, int world,
			  unsigned char *id, double deadline, char *err,
			  size_t errlen)
{
	struct addrinfo hints = {0}, *ai = NULL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "%s: %s", where, gai_strerror(rc));
		return rc == EAI_AGAIN ? 1 : -1;
	}
	int fd = -1;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", where, strerror(errno));
		return 1;
	}
	unsigned char hello[TR_RDV_HELLO], msg[TR_RDV_MSG];
	tr_rdv_hello(hello, world, rank);
	size_t got = send_all(fd, hello, sizeof hello, deadline) == 0
			     ? recv_all(fd, msg, sizeof msg, deadline) : 0;
	close(fd);
	return tr_rdv_decode(msg, got, world, where, id, err, errlen);
}

static int tcp_fetch(const char *where, const char *host, const char *port,
		     int rank, int world, unsigned char *id, double deadline,
		     double timeout_s, char *err, size_t errlen)
{
	for (;;) {
		int rc = tcp_fetch_once(where, host, port, rank, world, id,
					deadline, err, errlen);
		if (rc <= 0)
			return rc;
		if (!ms_left(deadline)) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (no rendezvous with rank 0 "
				 "within %g s)", timeout_s);
			return -1;
		}
		poll(NULL, 0, POLL_MS);
	}
}

int tr_rendezvous(const char *where, int rank, int world,
		  unsigned char id[TR_ID_BYTES], double timeout_s, char *err,
		  size_t errlen)
{
	if (world < 1 || rank < 0 || rank >= world) {
		snprintf(err, errlen, "rank %d is not one of %d", rank, world);
		return -1;
	}
	double deadline = at_now() + timeout_s;
	unsigned char msg[TR_RDV_MSG];
	if (rank == 0)
		tr_rdv_encode(msg, world, id);
	if (!strncmp(where, "file:", 5) && where[5]) {
		const char *path = where + 5;
		return rank == 0 ? file_publish(path, msg, err, errlen)
				 : file_wait(path, world, id, deadline, timeout_s,
					     err, errlen);
	}
	char host[256], port[16];
	if (!strncmp(where, "tcp://", 6) &&
	    split_address(where + 6, host, sizeof host, port, sizeof port) == 0)
		return rank == 0 ? tcp_serve(where, port, world, msg, deadline,
					     timeout_s, err, errlen)
				 : tcp_fetch(where, host, port, rank, world, id,
					     deadline, timeout_s, err, errlen);
	snprintf(err, errlen, "%s: not file:PATH or tcp://HOST:PORT", where);
	return -1;
}

void tr_rendezvous_done(const char *where, int rank)
{
	if (rank == 0 && !strncmp(where, "file:", 5) && where[5])
		unlink(where + 5);
}

/* Parses a decimal int in [lo, hi] from s; 0 or -1. */
static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

int tr_rank_from_env(int *rank, int *world, char *err, size_t errlen)
{
	static const char *pairs[][2] = {
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
		const char *r = getenv(pairs[i][0]), *w = getenv(pairs[i][1]);
		if (!r && !w)
			continue;
		if (!r || !w || parse_int(w, 1, 1 << 20, world) ||
		    parse_int(r, 0, *world - 1, rank)) {
			snprintf(err, errlen, "the environment's %s=%s and %s=%s "
				 "are not a rank and a world size", pairs[i][0],
				 r ? r : "(unset)", pairs[i][1], w ? w : "(unset)");
			return -1;
		}
		return 1;
	}
	return 0;
}

int tr_local_rank(int rank)
{
	static const char *names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
				      "MPI_LOCALRANKID", "SLURM_LOCALID"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		const char *v = getenv(names[i]);
		int local;
		if (v && parse_int(v, 0, 1 << 20, &local) == 0)
			return local;
	}
	return rank;
}
