/* pump.h - a thread that moves a pipe's bytes while the stage computes.
 *
 * A stage in a pipeline otherwise alternates between its pipes and its
 * arithmetic: it reads a record, computes, writes, and only then reads
 * the next, while the stages on either side wait.  With a pump the next
 * record's bytes arrive, and the last one's leave, while it computes.
 *
 * Up to AT_PUMP_BLOCKS blocks of AT_PUMP_BLOCK bytes wait in memory, taken
 * as the backlog grows and kept for reuse (fresh memory costs a page fault
 * a page).  Used on pipes and sockets (at_is_pipe): a file is read and
 * written directly, and the bytes are the same either way.
 */
#ifndef ANDREA_PUMP_H
#define ANDREA_PUMP_H

#include <stddef.h>

#define AT_PUMP_BLOCK (1u << 20)
#define AT_PUMP_BLOCKS 32

typedef struct at_pump at_pump;

/* 1 when fd is a pipe or a socket. */
int at_is_pipe(int fd);

/* Starts reading fd ahead on a thread; NULL if none could be started (the
 * caller then reads fd itself). */
at_pump *at_pump_reader(int fd);
/* Up to n bytes into buf: fewer only at the end of the input, or where a
 * read failed (then *err is its errno, else 0). */
size_t at_pump_read(at_pump *p, void *buf, size_t n, int *err);

/* Starts a thread writing to fd what at_pump_write queues; NULL if none
 * could be started. */
at_pump *at_pump_writer(int fd);
/* Queues n bytes, waiting while the backlog is full; -1 with errno set
 * once a write has failed (what was queued after it is dropped). */
int at_pump_write(at_pump *p, const void *buf, size_t n);
/* Waits until every byte queued is written; -1 with errno set if a write
 * failed. */
int at_pump_flush(at_pump *p);

/* A reader's thread is stopped (what it read ahead is dropped); a writer's
 * queue is written out first.  NULL is ignored. */
void at_pump_free(at_pump *p);

#endif
