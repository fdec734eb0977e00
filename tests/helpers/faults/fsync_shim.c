/* What a process made durable, observed from outside its code (LD_PRELOAD).
 *
 * Compiled at test time by tests/helpers/faults/powerloss.py and preloaded into the server under
 * test. Every fsync/fdatasync, every file or directory creation and every rename is
 * appended, one line each, to the file named by $FSYNC_SHIM_LOG:
 *
 *   S seq tid t_start_ns t_end_ns ino size path    fsync of a regular file (size before it)
 *   D seq tid t_start_ns t_end_ns ino 0 path       fsync of a directory
 *   C seq tid 0 0 ino 0 path                       a file that did not exist was created
 *   M seq tid 0 0 0 0 path                         a directory was created
 *   R seq tid 0 0 ino 0 src\tdst                   a rename
 *   c, m, r (lower case): the same, journaled before the call (ino 0, the path as given,
 *                         made absolute): a kill -9 between a creation and its upper-case
 *                         line leaves a file the journal would otherwise not explain
 *
 * seq is one counter over all threads: an fsync's seq is taken before the call, a
 * creation's after it, so "creation seq < directory fsync seq" means the fsync covered
 * it. Times are CLOCK_MONOTONIC (Python's time.monotonic()).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int journal = -1;
static uint64_t counter;

__attribute__((constructor)) static void shim_init(void) {
    const char *path = getenv("FSYNC_SHIM_LOG");
    if (path && *path)
        journal = (int)syscall(SYS_openat, AT_FDCWD, path,
                               O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

static uint64_t next_seq(void) { return __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST); }

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void emit(char kind, uint64_t seq, long long t0, long long t1, unsigned long long ino,
                 long long size, const char *path, const char *path2) {
    if (journal < 0)
        return;
    char line[2 * PATH_MAX + 160];
    int n = snprintf(line, sizeof line, "%c %llu %ld %lld %lld %llu %lld %s%s%s\n", kind,
                     (unsigned long long)seq, (long)syscall(SYS_gettid), t0, t1, ino, size,
                     path, path2 ? "\t" : "", path2 ? path2 : "");
    if (n > 0 && n < (int)sizeof line) {
        ssize_t ignored = write(journal, line, (size_t)n);
        (void)ignored;
    }
}

static void fd_path(int fd, char *out) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, PATH_MAX - 1);
    out[n > 0 ? n : 0] = '\0';
}

/* An absolute spelling of (dirfd, path), without resolving the last component. */
static void absolute(int dirfd, const char *path, char *out) {
    if (path[0] == '/') {
        snprintf(out, PATH_MAX, "%s", path);
        return;
    }
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base))
            base[0] = '\0';
    } else {
        fd_path(dirfd, base);
    }
    snprintf(out, PATH_MAX, "%s/%s", base, path);
}

#define REAL(name) static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static int synced(int fd, int (*call)(int)) {
    struct stat st;
    int have = fstat(fd, &st) == 0;
    uint64_t seq = next_seq();
    long long t0 = now_ns();
    int rc = call(fd);
    long long t1 = now_ns();
    if (rc == 0 && have && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
        int saved = errno;
        char path[PATH_MAX];
        fd_path(fd, path);
        emit(S_ISDIR(st.st_mode) ? 'D' : 'S', seq, t0, t1, (unsigned long long)st.st_ino,
             S_ISDIR(st.st_mode) ? 0 : (long long)st.st_size, path, NULL);
        errno = saved;
    }
    return rc;
}

int fsync(int fd) {
    REAL(fsync);
    return synced(fd, real_fsync);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    return synced(fd, real_fdatasync);
}

/* A creation: the file did not exist before the call and the call succeeded. */
static int opened(int dirfd, const char *path, int flags, int existed, int fd) {
    if (fd >= 0 && (flags & O_CREAT) && !existed) {
        int saved = errno;
        uint64_t seq = next_seq();
        struct stat st;
        char where[PATH_MAX];
        fd_path(fd, where);
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
            emit('C', seq, 0, 0, (unsigned long long)st.st_ino, 0, where, NULL);
        errno = saved;
        (void)dirfd;
        (void)path;
    }
    return fd;
}

/* Journaled before a call that may create ``path`` (kind c, m or r). */
static void pending(char kind, int dirfd, const char *path, int dirfd2, const char *path2) {
    int saved = errno;
    char where[PATH_MAX], where2[PATH_MAX];
    absolute(dirfd, path, where);
    if (path2)
        absolute(dirfd2, path2, where2);
    emit(kind, next_seq(), 0, 0, 0, 0, where, path2 ? where2 : NULL);
    errno = saved;
}

static void intent(int dirfd, const char *path, int flags, int existed) {
    if ((flags & O_CREAT) && !existed)
        pending('c', dirfd, path, 0, NULL);
}

static int exists_at(int dirfd, const char *path, int flags) {
    struct stat st;
    if (!(flags & O_CREAT))
        return 1;
    int saved = errno;
    int found = fstatat(dirfd, path, &st, 0) == 0;
    errno = saved;
    return found;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    REAL(open);
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    int existed = exists_at(AT_FDCWD, path, flags);
    intent(AT_FDCWD, path, flags, existed);
    return opened(AT_FDCWD, path, flags, existed, real_open(path, flags, mode));
}

int open64(const char *path, int flags, ...) {
    REAL(open64);
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    int existed = exists_at(AT_FDCWD, path, flags);
    intent(AT_FDCWD, path, flags, existed);
    return opened(AT_FDCWD, path, flags, existed, real_open64(path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...) {
    REAL(openat);
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    int existed = exists_at(dirfd, path, flags);
    intent(dirfd, path, flags, existed);
    return opened(dirfd, path, flags, existed, real_openat(dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...) {
    REAL(openat64);
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    int existed = exists_at(dirfd, path, flags);
    intent(dirfd, path, flags, existed);
    return opened(dirfd, path, flags, existed, real_openat64(dirfd, path, flags, mode));
}

int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

static void made_dir(int dirfd, const char *path, int rc) {
    if (rc == 0) {
        int saved = errno;
        uint64_t seq = next_seq();
        char where[PATH_MAX];
        absolute(dirfd, path, where);
        emit('M', seq, 0, 0, 0, 0, where, NULL);
        errno = saved;
    }
}

int mkdir(const char *path, mode_t mode) {
    REAL(mkdir);
    pending('m', AT_FDCWD, path, 0, NULL);
    int rc = real_mkdir(path, mode);
    made_dir(AT_FDCWD, path, rc);
    return rc;
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
    REAL(mkdirat);
    pending('m', dirfd, path, 0, NULL);
    int rc = real_mkdirat(dirfd, path, mode);
    made_dir(dirfd, path, rc);
    return rc;
}

static void renamed(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int rc) {
    if (rc == 0) {
        int saved = errno;
        uint64_t seq = next_seq();
        char src[PATH_MAX], dst[PATH_MAX];
        struct stat st;
        absolute(olddirfd, oldpath, src);
        absolute(newdirfd, newpath, dst);
        unsigned long long ino = fstatat(newdirfd, newpath, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
        emit('R', seq, 0, 0, ino, 0, src, dst);
        errno = saved;
    }
}

int rename(const char *oldpath, const char *newpath) {
    REAL(rename);
    pending('r', AT_FDCWD, oldpath, AT_FDCWD, newpath);
    int rc = real_rename(oldpath, newpath);
    renamed(AT_FDCWD, oldpath, AT_FDCWD, newpath, rc);
    return rc;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    REAL(renameat);
    pending('r', olddirfd, oldpath, newdirfd, newpath);
    int rc = real_renameat(olddirfd, oldpath, newdirfd, newpath);
    renamed(olddirfd, oldpath, newdirfd, newpath, rc);
    return rc;
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    REAL(renameat2);
    pending('r', olddirfd, oldpath, newdirfd, newpath);
    int rc = real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
    renamed(olddirfd, oldpath, newdirfd, newpath, rc);
    return rc;
}
