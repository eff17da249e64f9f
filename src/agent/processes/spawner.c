// The spawner in C: the same work as spawner-main.js, without a Node process around it.
//
// A fork copies the forking process's page tables and makes every page it touches afterwards a
// copy-on-write fault; from a Node process that costs milliseconds of CPU per command on small
// virtual machines, more than the command `true` itself. posix_spawn(3) starts the shell with
// vfork semantics (glibc: clone(CLONE_VM | CLONE_VFORK)): nothing is copied, whatever the size.
// The agent compiles this file with the system's C compiler when it can (native-spawner.js) and
// uses spawner-main.js when it cannot; both speak the protocol below.
//
// Protocol (spawner-frames.js): frames on stdin (from the agent) and stdout (to it), each
//   u32 length of what follows (little-endian) | u8 type | u32 handle | payload
// from the agent:
//   'e' the base environment of every process: "K=V\0"...
//   's' spawn: cwd "\0" command "\0" then the request's "K=V\0"... (added to the base)
//   'r' stop reading the pipes of a process whose shell exited: relay what they hold, close
// to the agent, for each process in this order: 'p' or 'f', then 'd'..., 'x', then 'c'
//   'p' spawned: i32 pid                   'f' failed: the reason, as text
//   'd' output bytes (stdout and stderr)   'x' exit: i32 code | i32 signal | u8 closed
//   'c' no more output comes ('x' with closed = 1 stands for both)
// (an exit's code is -1 when a signal ended the shell, its signal 0 when none did)
// End of file on stdin means the agent is gone: every process group started is killed, and
// the spawner exits. Output is read only while what waits to go to the agent is small, so a
// child that writes faster than the agent reads blocks on its pipe (backpressure).

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define READ_CHUNK (64 * 1024)
/** Output is not read while more than this waits to go to the agent. */
#define OUT_HIGH_WATER (256 * 1024)
/** The most a stop relays from one pipe: a child that keeps writing cannot make it endless. */
#define STOP_DRAIN_MAX (1024 * 1024)
/** A frame from the agent larger than this is a broken agent. */
#define FRAME_MAX (64 * 1024 * 1024)

struct child {
  uint32_t handle;
  pid_t pid;
  int fd[2]; /* stdout, stderr; -1 once at end of file */
  int exited;
};

struct buf {
  char *p;
  size_t len, cap;
};

static struct child **children;
static size_t nchildren, capchildren;
/** Groups whose reading stopped while members may live on: killed when the agent goes. */
static pid_t *lingering;
static size_t nlingering, caplingering;
static struct buf in, out;
static char **base_env;
static int sig_pipe[2];

static void die(const char *what) {
  fprintf(stderr, "tether spawner: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void *grow(void *p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return p;
  size_t cap2 = *cap ? *cap : 16;
  while (cap2 < need) cap2 *= 2;
  p = realloc(p, cap2 * size);
  if (!p) die("out of memory");
  *cap = cap2;
  return p;
}

static void append(struct buf *b, const void *data, size_t n) {
  b->p = grow(b->p, &b->cap, b->len + n, 1);
  memcpy(b->p + b->len, data, n);
  b->len += n;
}

static void put_u32(struct buf *b, uint32_t v) {
  unsigned char le[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
  append(b, le, 4);
}

static uint32_t get_u32(const char *p) {
  const unsigned char *u = (const unsigned char *)p;
  return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void frame(char type, uint32_t handle, const void *payload, size_t n) {
  put_u32(&out, (uint32_t)(1 + 4 + n));
  append(&out, &type, 1);
  put_u32(&out, handle);
  if (n) append(&out, payload, n);
}

static void flush_out(void) {
  while (out.len > 0) {
    ssize_t n = write(1, out.p, out.len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      out.len = 0; /* the agent is gone: its end of file on stdin comes next */
      return;
    }
    memmove(out.p, out.p + n, out.len - (size_t)n);
    out.len -= (size_t)n;
  }
}

static void remember_group(pid_t pid) {
  lingering = grow(lingering, &caplingering, nlingering + 1, sizeof *lingering);
  lingering[nlingering++] = pid;
}

static void drop_child(size_t i) {
  free(children[i]);
  children[i] = children[--nchildren];
}

static size_t find_handle(uint32_t handle) {
  for (size_t i = 0; i < nchildren; i++)
    if (children[i]->handle == handle) return i;
  return (size_t)-1;
}

/** Sends what one read of the pipe gives; at end of file (or an error) closes it. */
static void read_pipe(struct child *c, int k) {
  static char chunk[READ_CHUNK];
  ssize_t n = read(c->fd[k], chunk, sizeof chunk);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n > 0) {
    frame('d', c->handle, chunk, (size_t)n);
    return;
  }
  close(c->fd[k]);
  c->fd[k] = -1;
}

static int output_open(const struct child *c) { return c->fd[0] >= 0 || c->fd[1] >= 0; }

static const char *errno_name(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case ENOTDIR: return "ENOTDIR";
    case ENOEXEC: return "ENOEXEC";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case E2BIG: return "E2BIG";
    case ENOMEM: return "ENOMEM";
    case EAGAIN: return "EAGAIN";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    default: return "E?";
  }
}

static void fail(uint32_t handle, int err, const char *cwd) {
  char msg[512];
  int n = snprintf(msg, sizeof msg, "spawn sh %s: %s (in %s)", errno_name(err), strerror(err), cwd);
  frame('f', handle, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

/** The environment of a process: the base, with the request's variables over it. */
static char **merge_env(char **extra, size_t nextra) {
  size_t nbase = 0;
  while (base_env && base_env[nbase]) nbase++;
  char **env = malloc((nbase + nextra + 1) * sizeof *env);
  if (!env) die("out of memory");
  size_t n = 0;
  for (size_t i = 0; i < nbase; i++) {
    const char *eq = strchr(base_env[i], '=');
    size_t klen = eq ? (size_t)(eq - base_env[i]) : strlen(base_env[i]);
    int overridden = 0;
    for (size_t j = 0; j < nextra && !overridden; j++)
      overridden = strncmp(extra[j], base_env[i], klen) == 0 && extra[j][klen] == '=';
    if (!overridden) env[n++] = base_env[i];
  }
  for (size_t j = 0; j < nextra; j++) env[n++] = extra[j];
  env[n] = NULL;
  return env;
}

/** Splits "a\0b\0" into pointers (into `p`, which must outlive them). */
static char **split(char *p, size_t n, size_t *count) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += p[i] == '\0';
  char **v = malloc((c + 1) * sizeof *v);
  if (!v) die("out of memory");
  size_t k = 0;
  for (size_t i = 0; i < n && k < c; k++) {
    v[k] = p + i;
    i += strlen(p + i) + 1;
  }
  v[c] = NULL;
  *count = c;
  return v;
}

/**
 * The shell as execvp(3) in the child would find it: along the PATH of the process's own
 * environment (as Node's spawn does), else along the default one.
 */
static const char *find_sh(char **env, char *path, size_t size) {
  const char *dirs = "/bin:/usr/bin";
  for (char **e = env; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) dirs = *e + 5;
  for (const char *d = dirs;; d++) {
    const char *end = strchrnul(d, ':');
    int n = snprintf(path, size, "%.*s%ssh", (int)(end - d), d, end == d ? "" : "/");
    if (n > 0 && (size_t)n < size && access(path, X_OK) == 0) return path;
    if (*end == '\0') return NULL;
    d = end;
  }
}

static void spawn_one(uint32_t handle, char *payload, size_t n) {
  size_t count;
  char **parts = split(payload, n, &count);
  if (count < 2) {
    frame('f', handle, "bad spawn request", 17);
    free(parts);
    return;
  }
  const char *cwd = parts[0];
  char *argv[] = {"sh", "-c", parts[1], NULL};
  char **env = merge_env(parts + 2, count - 2);
  int o[2] = {-1, -1}, e[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  int err = 0;
  if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) err = errno;
  if (!err) {
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, o[1], 1);
    posix_spawn_file_actions_adddup2(&fa, e[1], 2);
    posix_spawn_file_actions_addchdir_np(&fa, cwd);
    posix_spawnattr_init(&at);
    // Its own session and process group (kill -pid stops what it started), default signal
    // dispositions (this process ignores SIGPIPE) and no blocked signals.
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    char path[4096];
    const char *sh = find_sh(env, path, sizeof path);
    err = sh ? posix_spawn(&pid, sh, &fa, &at, argv, env) : ENOENT;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (!err) {
      struct child *c = calloc(1, sizeof *c);
      if (!c) die("out of memory");
      c->handle = handle;
      c->pid = pid;
      c->fd[0] = o[0];
      c->fd[1] = e[0];
      fcntl(o[0], F_SETFL, O_NONBLOCK);
      fcntl(e[0], F_SETFL, O_NONBLOCK);
      children = grow(children, &capchildren, nchildren + 1, sizeof *children);
      children[nchildren++] = c;
      int32_t p = pid;
      frame('p', handle, &p, 4);
      o[0] = e[0] = -1; /* the child's now */
    }
  }
  for (int k = 0; k < 2; k++) {
    if (o[k] >= 0) close(o[k]);
    if (e[k] >= 0) close(e[k]);
  }
  if (err) fail(handle, err, cwd);
  free(env);
  free(parts);
}

static void stop_reading(uint32_t handle) {
  size_t i = find_handle(handle);
  if (i == (size_t)-1) return; /* it closed on its own: that close is already on its way */
  struct child *c = children[i];
  for (int k = 0; k < 2; k++) {
    for (size_t left = STOP_DRAIN_MAX; c->fd[k] >= 0 && left > 0;) {
      static char chunk[READ_CHUNK];
      ssize_t n = read(c->fd[k], chunk, left < sizeof chunk ? left : sizeof chunk);
      if (n > 0) {
        frame('d', handle, chunk, (size_t)n);
        left -= (size_t)n;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        break; /* EAGAIN: nothing more now; 0: end of file */
      }
    }
    if (c->fd[k] >= 0) close(c->fd[k]);
    c->fd[k] = -1;
  }
  remember_group(c->pid);
  frame('c', handle, NULL, 0);
  if (c->exited) drop_child(i);
  else c->handle = UINT32_MAX; /* reaped later, silently */
}

static void handle_frame(char type, uint32_t handle, char *payload, size_t n) {
  switch (type) {
    case 'e': {
      char *copy = malloc(n + 1);
      if (!copy) die("out of memory");
      memcpy(copy, payload, n);
      copy[n] = '\0';
      size_t count;
      base_env = split(copy, n, &count);
      break;
    }
    case 's':
      spawn_one(handle, payload, n);
      break;
    case 'r':
      stop_reading(handle);
      break;
  }
}

static void read_agent(void) {
  char chunk[READ_CHUNK];
  ssize_t n = read(0, chunk, sizeof chunk);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    // The agent is gone (exit, crash or kill): nobody is left to read or stop these.
    for (size_t i = 0; i < nchildren; i++) kill(-children[i]->pid, SIGKILL);
    for (size_t i = 0; i < nlingering; i++) kill(-lingering[i], SIGKILL);
    exit(0);
  }
  append(&in, chunk, (size_t)n);
  size_t at = 0;
  while (in.len - at >= 4) {
    uint32_t len = get_u32(in.p + at);
    if (len < 5 || len > FRAME_MAX) {
      fprintf(stderr, "tether spawner: bad frame of %u bytes\n", len);
      exit(1);
    }
    if (in.len - at - 4 < len) break;
    char *f = in.p + at + 4;
    handle_frame(f[0], get_u32(f + 1), f + 5, len - 5);
    at += 4 + len;
  }
  memmove(in.p, in.p + at, in.len - at);
  in.len -= at;
}

static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  ssize_t ignored = write(sig_pipe[1], "", 1);
  (void)ignored;
  errno = saved;
}

static void reap(void) {
  char drain[64];
  while (read(sig_pipe[0], drain, sizeof drain) > 0) {
  }
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (size_t i = 0; i < nchildren; i++) {
      struct child *c = children[i];
      if (c->pid != pid) continue;
      c->exited = 1;
      if (c->handle == UINT32_MAX) {
        drop_child(i); /* its reading stopped: already closed */
        break;
      }
      int32_t v[2] = {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                      WIFSIGNALED(status) ? WTERMSIG(status) : 0};
      char payload[9];
      memcpy(payload, v, 8);
      payload[8] = !output_open(c);
      frame('x', c->handle, payload, 9);
      if (payload[8]) drop_child(i);
      break;
    }
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) die("pipe");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGCHLD, &sa, NULL) < 0) die("sigaction");
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
  struct pollfd *fds = NULL;
  size_t capfds = 0;
  for (;;) {
    int reading = out.len < OUT_HIGH_WATER;
    fds = grow(fds, &capfds, 3 + 2 * nchildren, sizeof *fds);
    size_t n = 0;
    fds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = out.len ? 1 : -1, .events = POLLOUT};
    for (size_t i = 0; i < nchildren; i++)
      for (int k = 0; k < 2; k++)
        fds[n++] = (struct pollfd){.fd = reading ? children[i]->fd[k] : -1, .events = POLLIN};
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    // Output first, then exits: an exit found with both pipes at end of file closes at once.
    for (size_t i = 0, f = 3; i < nchildren; i++) {
      struct child *c = children[i];
      for (int k = 0; k < 2; k++, f++)
        if (fds[f].fd >= 0 && fds[f].revents) read_pipe(c, k);
    }
    for (size_t i = 0; i < nchildren;) {
      struct child *c = children[i];
      if (c->exited && !output_open(c) && c->handle != UINT32_MAX) {
        frame('c', c->handle, NULL, 0);
        drop_child(i);
      } else {
        i++;
      }
    }
    if (fds[1].revents) reap();
    if (fds[0].revents) read_agent();
    flush_out();
  }
}
