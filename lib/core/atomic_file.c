/* atomic_file.c - a named file written whole or not at all
 * (atomic_file.h). */
#include "core/atomic_file.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process umask: from /proc/self/status where Linux shows it (4.7
 * on), so that no other thread ever sees it changed; else set to 0 and
 * back, for that instant. */
static mode_t process_umask(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned m;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Umask: %o", &m) == 1) {
			fclose(f);
			return (mode_t)(m & 0777);
		}
	if (f)
		fclose(f);
	mode_t old = umask(0);
	umask(old);
	return old;
}

static int copy_name(char *dst, size_t len, const char *src)
{
	if ((size_t)snprintf(dst, len, "%s", src) >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* The temporaries open now, by name, for at_afile_drop_all.  A slot's
 * name is written before the slot is marked used, so that a signal never
 * reads half a name. */
#define OPEN_MAX 16
static char open_name[OPEN_MAX][sizeof ((at_afile *)0)->tmp];
static volatile sig_atomic_t open_used[OPEN_MAX];

/* A signal may reach another thread (a stream pump, a worker) while
 * this one, its own signals blocked, makes a temporary: the handler
 * then waits for the name to be remembered, and once a handler began
 * no temporary is made.  Both sides set their flag before they read
 * the other's (sequentially consistent), so one of them sees it. */
static atomic_int making, ending;

static void remember(at_afile *a)
{
	for (int i = 0; i < OPEN_MAX; i++)
		if (!open_used[i]) {
			memcpy(open_name[i], a->tmp, strlen(a->tmp) + 1);
			atomic_thread_fence(memory_order_release);
			open_used[i] = 1;
			a->slot = i + 1;
			return;
		}
}

static void forget(at_afile *a)
{
	if (a->slot > 0)
		open_used[a->slot - 1] = 0;
	a->slot = 0;
}

void at_afile_drop_all(void)
{
	atomic_store(&ending, 1);
	while (atomic_load(&making))
		; /* microseconds: the maker cannot be interrupted */
	for (int i = 0; i < OPEN_MAX; i++)
		if (open_used[i]) {
			unlink(open_name[i]);
			open_used[i] = 0;
		}
}

int at_afile_open(at_afile *a, const char *path)
{
	memset(a, 0, sizeof *a);
	if (!path || !*path) {
		errno = EINVAL;
		return -1;
	}
	if (copy_name(a->path, sizeof a->path, path) < 0)
		return -1;
	struct stat st;
	int exists = stat(path, &st) == 0;
	char *target = NULL;
	/* a device, a fifo, a pipe or socket behind /dev/stdout or
	 * /dev/fd/N, a dangling link: written in place */
	if ((exists && !S_ISREG(st.st_mode)) ||
	    (!exists && lstat(path, &st) == 0) ||
	    (exists && !(target = realpath(path, NULL)))) {
		a->f = fopen(path, "wb");
		return a->f ? 0 : -1;
	}
	if (target) { /* the file the name leads to: a link stays a link */
		int rc = copy_name(a->path, sizeof a->path, target);
		free(target);
		if (rc < 0)
			return -1;
	}
	if (exists && access(a->path, W_OK) != 0)
		return -1; /* a read-only file stays, as the shell's > has it */
	/* PATH.XXXXXX, the name cut to fit NAME_MAX with its suffix */
	const char *slash = strrchr(a->path, '/');
	size_t dir_len = slash ? (size_t)(slash - a->path) + 1 : 0;
	size_t base_len = strlen(a->path) - dir_len;
	if (base_len > NAME_MAX - 7) { /* not inside a UTF-8 character */
		base_len = NAME_MAX - 7;
		while (base_len &&
		       ((unsigned char)a->path[dir_len + base_len] & 0xc0) == 0x80)
			base_len--;
	}
	int n = snprintf(a->tmp, sizeof a->tmp, "%.*s.XXXXXX",
			 (int)(dir_len + base_len), a->path);
	if (n < 0 || (size_t)n >= sizeof a->tmp) {
		a->tmp[0] = 0;
		errno = ENAMETOOLONG;
		return -1;
	}
	/* no signal between the temporary's making and its registering */
	sigset_t all, was;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &was);
	atomic_store(&making, 1);
	if (atomic_load(&ending)) { /* another thread is ending the tool */
		atomic_store(&making, 0);
		pthread_sigmask(SIG_SETMASK, &was, NULL);
		for (;;)
			pause();
	}
	int fd = mkstemp(a->tmp);
	int e = errno;
	if (fd >= 0)
		remember(a);
	atomic_store(&making, 0);
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (fd < 0) {
		a->tmp[0] = 0;
		errno = e;
		return -1;
	}
	/* a file replaced keeps its owner and group where the process may
	 * give them (root; a group of the owner's): else they are its own */
	if (exists && fchown(fd, st.st_uid, st.st_gid) != 0)
		(void)!fchown(fd, (uid_t)-1, st.st_gid);
	fchmod(fd, exists ? st.st_mode & 0777 : 0666 & ~process_umask());
	if (!(a->f = fdopen(fd, "wb"))) {
		close(fd);
		at_afile_abort(a);
		return -1;
	}
	return 0;
}

int at_afile_commit(at_afile *a, char *err, size_t errlen)
{
	FILE *f = a->f;
	a->f = NULL;
	int e = 0;
	const char *what = "write error";
	if (fflush(f) != 0 || ferror(f))
		e = errno ? errno : EIO; /* a failed fwrite set it */
	else if (a->tmp[0] && fsync(fileno(f)) != 0)
		e = errno;
	if (fclose(f) != 0 && !e)
		e = errno;
	if (!e && a->tmp[0] && rename(a->tmp, a->path) != 0) {
		e = errno;
		what = "cannot rename into place";
	}
	if (!e) {
		forget(a);
		a->tmp[0] = 0;
		return 0;
	}
	at_afile_abort(a);
	snprintf(err, errlen, "%s: %s", what, strerror(e));
	return -1;
}

void at_afile_abort(at_afile *a)
{
	int e = errno;
	if (a->f)
		fclose(a->f);
	a->f = NULL;
	if (a->tmp[0])
		unlink(a->tmp);
	forget(a);
	a->tmp[0] = 0;
	errno = e;
}
