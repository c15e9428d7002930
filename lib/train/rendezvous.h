/* rendezvous.h - how the ranks of a data-parallel run find each other
 * (issue 21): the communicator's id, made by rank 0, handed to every
 * other rank through a shared file ("file:PATH", llm.c's way) or a TCP
 * socket ("tcp://HOST:PORT", rank 0 listening on PORT); and the rank and
 * size an mpirun or srun puts in the environment. */
#ifndef ANDREA_TRAIN_RENDEZVOUS_H
#define ANDREA_TRAIN_RENDEZVOUS_H

#include <stddef.h>

#define TR_ID_BYTES 128 /* NCCL's unique id */
/* What rank 0 sends: the magic "andrRDV1", the world size (LE32), the id,
 * the CRC-32 of the bytes before it (LE32). */
#define TR_RDV_MSG (8 + 4 + TR_ID_BYTES + 4)

void tr_rdv_encode(unsigned char msg[TR_RDV_MSG], int world,
		   const unsigned char id[TR_ID_BYTES]);
/* What a rank sends rank 0 first over TCP: the magic "andrHEL1", the
 * world size and its rank (LE32 each). */
#define TR_RDV_HELLO 16
void tr_rdv_hello(unsigned char hello[TR_RDV_HELLO], int world, int rank);
/* The rank of a hello of n bytes for a run of `world`: 1 .. world - 1, or
 * -1 when it is not one. */
int tr_rdv_hello_rank(const unsigned char *hello, size_t n, int world);

/* Checks n received bytes from `from` (a path or an address, for the
 * message) for a run of `world` ranks: 0 with the id, or -1 with the
 * reason in err. */
int tr_rdv_decode(const unsigned char *msg, size_t n, int world,
		  const char *from, unsigned char id[TR_ID_BYTES], char *err,
		  size_t errlen);

/* Rank `rank` of `world`: rank 0 publishes id at `where` ("file:PATH":
 * written whole, then renamed into place; "tcp://HOST:PORT": served to
 * the other world - 1 ranks as they connect), every other rank waits for
 * it and fills id.  Nobody waits longer than timeout_s seconds.  Returns
 * 0, or -1 with the reason in err. */
int tr_rendezvous(const char *where, int rank, int world,
		  unsigned char id[TR_ID_BYTES], double timeout_s, char *err,
		  size_t errlen);

/* After every rank has joined: rank 0 removes the file of a "file:"
 * rendezvous, so that the next run with the same path cannot read this
 * run's id. */
void tr_rendezvous_done(const char *where, int rank);

/* The rank and world size a launcher put in the environment: Open MPI's
 * OMPI_COMM_WORLD_RANK and _SIZE, MPICH's and Intel MPI's PMI_RANK and
 * PMI_SIZE, or srun's SLURM_PROCID and SLURM_NTASKS, first found first.
 * 1 when found, 0 when none is set, -1 with the reason in err when a pair
 * is malformed or the rank is out of range. */
int tr_rank_from_env(int *rank, int *world, char *err, size_t errlen);

/* Which GPU of its host rank `rank` takes: the local rank a launcher put
 * in the environment (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_LOCALID, first found first), else rank. */
int tr_local_rank(int rank);

#endif
