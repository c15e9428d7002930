/* atomic_file.h - a named file written whole or not at all.
 *
 * Every file an andrea tool writes whole by name (-o, --png, .npy,
 * safetensors, JSON; not andrea-train's --log, appended as it goes)
 * goes through here.  A regular file, or a new one, is written
 * through a temporary file beside it and renamed into place when done, so
 * that a failure (a full disk, a dead upstream stage) leaves the earlier
 * file as it was and no partial one.  A file replaced keeps its
 * permission bits (less setuid and setgid), and one that is not writable
 * is refused; a new one gets 0666 less the umask, as the shell's > would.
 * A symbolic link is followed: its target is replaced and the link
 * stays.  A device, a fifo, a pipe or socket (/dev/null, /dev/full,
 * /dev/stdout, >(cmd)) and a dangling link are written in place, and
 * never removed.
 */
#ifndef ANDREA_ATOMIC_FILE_H
#define ANDREA_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
	FILE *f;           /* write here */
	char path[4096];   /* the file renamed into (a link's target) */
	char tmp[4200];    /* the temporary file, or "" when in place */
	int slot;          /* its place among the open temporaries, 1-based */
} at_afile;

/* Opens path for writing (binary).  Returns -1 with errno set and
 * a->f NULL where it cannot (an empty or too long name: EINVAL or
 * ENAMETOOLONG). */
int at_afile_open(at_afile *a, const char *path);
/* Flushes, syncs and closes the file, and renames it into place.
 * Returns -1 on failure, with err ("write error: ..." or "cannot rename
 * into place: ...") filled and the temporary file gone. */
int at_afile_commit(at_afile *a, char *err, size_t errlen);
/* Closes and drops a file not committed: the temporary file is removed,
 * a file written in place is left.  Harmless after commit or a failed
 * open. */
void at_afile_abort(at_afile *a);
/* Removes every temporary file opened and not yet committed or aborted,
 * without closing anything: for an exit or a fatal signal that comes
 * before the rename (cli.c calls it), on whichever thread the signal
 * reached.  Async-signal-safe.  Files are opened from one thread; once
 * this began, a file being opened never is. */
void at_afile_drop_all(void);

#endif
