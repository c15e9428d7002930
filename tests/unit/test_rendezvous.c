/* test_rendezvous.c - unit test of the ranks' rendezvous
 * (lib/train/rendezvous.h): the message and the hello, each kind of
 * damage to them; every rank of 1, 2 and 4 getting rank 0's id through a
 * file and over TCP on this host, in processes of their own; the
 * timeouts, a stale file of another run, a stray client, bad addresses;
 * the rank and size from a launcher's environment.
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/rendezvous.h"
#include "check.h"

static void some_id(unsigned char *id, int salt)
{
	for (int i = 0; i < TR_ID_BYTES; i++)
		id[i] = (unsigned char)(i * 37 + salt * 11 + 5);
}

static void test_messages(void)
{
	unsigned char id[TR_ID_BYTES], got[TR_ID_BYTES], msg[TR_RDV_MSG];
	char err[300];
	some_id(id, 1);
	tr_rdv_encode(msg, 4, id);
	CHECK(tr_rdv_decode(msg, sizeof msg, 4, "x", got, err, sizeof err) == 0);
	CHECK(memcmp(got, id, TR_ID_BYTES) == 0);
	CHECK(tr_rdv_decode(msg, sizeof msg - 1, 4, "p", got, err, sizeof err) < 0);
	CHECK(strstr(err, "p: not a rendezvous message"));
	CHECK(tr_rdv_decode(msg, sizeof msg, 2, "p", got, err, sizeof err) < 0);
	CHECK(strstr(err, "4 ranks, not 2"));
	for (size_t i = 0; i < sizeof msg; i++) { /* any one byte changed */
		msg[i] ^= 0x40;
		CHECK(tr_rdv_decode(msg, sizeof msg, 4, "p", got, err,
				    sizeof err) < 0);
		msg[i] ^= 0x40;
	}
	unsigned char h[TR_RDV_HELLO];
	tr_rdv_hello(h, 4, 3);
	CHECK(tr_rdv_hello_rank(h, sizeof h, 4) == 3);
	CHECK(tr_rdv_hello_rank(h, sizeof h, 5) == -1);
	CHECK(tr_rdv_hello_rank(h, sizeof h - 1, 4) == -1);
	tr_rdv_hello(h, 4, 0); /* rank 0 serves; it never says hello */
	CHECK(tr_rdv_hello_rank(h, sizeof h, 4) == -1);
	tr_rdv_hello(h, 4, 4);
	CHECK(tr_rdv_hello_rank(h, sizeof h, 4) == -1);
	h[0] ^= 1;
	CHECK(tr_rdv_hello_rank(h, sizeof h, 4) == -1);
}

/* world ranks in processes of their own at `where`; each child writes
 * the id it got (or zeros) to a pipe; returns how many got rank 0's. */
static int run_world(const char *where, int world, int salt)
{
	unsigned char id[TR_ID_BYTES];
	some_id(id, salt);
	int fds[2];
	if (pipe(fds))
		return -1;
	for (int r = world - 1; r >= 0; r--) { /* rank 0 last: the others wait */
		if (fork() == 0) {
			unsigned char mine[TR_ID_BYTES];
			char err[300];
			if (r == 0)
				memcpy(mine, id, sizeof mine);
			else
				memset(mine, 0, sizeof mine);
			int rc = tr_rendezvous(where, r, world, mine, 10.0, err,
					       sizeof err);
			if (rc < 0) {
				fprintf(stderr, "rank %d: %s\n", r, err);
				memset(mine, 0, sizeof mine);
			}
			if (write(fds[1], mine, sizeof mine) != sizeof mine)
				_exit(2);
			_exit(rc < 0);
		}
	}
	close(fds[1]);
	int same = 0;
	unsigned char got[TR_ID_BYTES];
	for (int r = 0; r < world; r++)
		if (read(fds[0], got, sizeof got) == sizeof got &&
		    memcmp(got, id, sizeof got) == 0)
			same++;
	close(fds[0]);
	for (int r = 0; r < world; r++)
		wait(NULL);
	return same;
}

/* A port nobody listens on now (the kernel's pick, then closed). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t l = sizeof a;
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
	    getsockname(fd, (struct sockaddr *)&a, &l))
		return 0;
	close(fd);
	return ntohs(a.sin_port);
}

static void test_worlds(const char *dir)
{
	char where[600];
	for (int world = 1; world <= 4; world *= 2) {
		snprintf(where, sizeof where, "file:%s/id%d", dir, world);
		CHECK(run_world(where, world, world) == world);
		tr_rendezvous_done(where, 0);
		CHECK(access(where + 5, F_OK) != 0); /* removed */
		snprintf(where, sizeof where, "tcp://localhost:%d", free_port());
		CHECK(run_world(where, world, world + 10) == world);
	}
}

static void test_failures(const char *dir)
{
	unsigned char id[TR_ID_BYTES];
	char err[300], where[600];
	some_id(id, 3);
	/* nobody comes */
	snprintf(where, sizeof where, "file:%s/never", dir);
	CHECK(tr_rendezvous(where, 1, 2, id, 0.2, err, sizeof err) < 0);
	CHECK(strstr(err, "never: rank 0 wrote no rendezvous file within 0.2 s"));
	snprintf(where, sizeof where, "tcp://localhost:%d", free_port());
	CHECK(tr_rendezvous(where, 1, 2, id, 0.2, err, sizeof err) < 0);
	CHECK(strstr(err, "no rendezvous with rank 0 within 0.2 s"));
	CHECK(tr_rendezvous(where, 0, 3, id, 0.2, err, sizeof err) < 0);
	CHECK(strstr(err, "0 of the 2 other ranks came within 0.2 s"));
	/* a file left by a run of another size */
	snprintf(where, sizeof where, "file:%s/stale", dir);
	CHECK(tr_rendezvous(where, 0, 4, id, 1.0, err, sizeof err) == 0);
	CHECK(tr_rendezvous(where, 1, 2, id, 1.0, err, sizeof err) < 0);
	CHECK(strstr(err, "for a run of 4 ranks, not 2"));
	/* a file that is not a message */
	char path[600];
	snprintf(path, sizeof path, "%s/junk", dir);
	FILE *f = fopen(path, "w");
	fputs("hello", f);
	fclose(f);
	snprintf(where, sizeof where, "file:%s", path);
	CHECK(tr_rendezvous(where, 1, 2, id, 1.0, err, sizeof err) < 0);
	CHECK(strstr(err, "not a rendezvous message of andrea's (5 bytes)"));
	/* a stray client that says nothing is not served as a rank */
	int port = free_port();
	snprintf(where, sizeof where, "tcp://127.0.0.1:%d", port);
	if (fork() == 0) {
		usleep(100000);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {0};
		a.sin_family = AF_INET;
		a.sin_port = htons(port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		connect(fd, (struct sockaddr *)&a, sizeof a);
		close(fd);
		_exit(0);
	}
	CHECK(tr_rendezvous(where, 0, 2, id, 0.5, err, sizeof err) < 0);
	CHECK(strstr(err, "0 of the 1 other ranks"));
	wait(NULL);
	/* addresses */
	const char *bad[] = {"nfs:/x", "file:", "tcp://host", "tcp://:80",
			     "tcp://host:port", "tcp://h:"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		CHECK(tr_rendezvous(bad[i], 1, 2, id, 0.1, err, sizeof err) < 0);
		CHECK(strstr(err, "not file:PATH or tcp://HOST:PORT"));
	}
	CHECK(tr_rendezvous("file:/x", 2, 2, id, 0.1, err, sizeof err) < 0);
	CHECK(strstr(err, "rank 2 is not one of 2"));
}

static void test_env(void)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
				     "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
				     "SLURM_NTASKS"};
	for (size_t i = 0; i < 6; i++)
		unsetenv(vars[i]);
	int rank = -1, world = -1;
	char err[300];
	CHECK(tr_rank_from_env(&rank, &world, err, sizeof err) == 0);
	setenv("SLURM_PROCID", "2", 1);
	setenv("SLURM_NTASKS", "4", 1);
	CHECK(tr_rank_from_env(&rank, &world, err, sizeof err) == 1);
	CHECK(rank == 2 && world == 4);
	setenv("PMI_RANK", "1", 1); /* MPI's pair comes before srun's */
	setenv("PMI_SIZE", "3", 1);
	CHECK(tr_rank_from_env(&rank, &world, err, sizeof err) == 1);
	CHECK(rank == 1 && world == 3);
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	CHECK(tr_rank_from_env(&rank, &world, err, sizeof err) < 0);
	CHECK(strstr(err, "OMPI_COMM_WORLD_RANK=3 and OMPI_COMM_WORLD_SIZE=3"));
	setenv("OMPI_COMM_WORLD_RANK", "x", 1);
	CHECK(tr_rank_from_env(&rank, &world, err, sizeof err) < 0);
	unsetenv("OMPI_COMM_WORLD_SIZE");
	setenv("OMPI_COMM_WORLD_RANK", "0", 1);
	CHECK(tr_rank_from_env(&rank, &world, err, sizeof err) < 0);
	CHECK(strstr(err, "(unset)"));
	for (size_t i = 0; i < 6; i++)
		unsetenv(vars[i]);
}

int main(void)
{
	char dir[] = "/tmp/andrea-rdv-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	test_messages();
	test_worlds(dir);
	test_failures(dir);
	test_env();
	char cmd[100];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return check_finish("test_rendezvous");
}
