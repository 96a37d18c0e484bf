#include "launch.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <stdexcept>

#include "trident/base/error.h"
#include "trident/comm/world.h"

namespace trident::cli {
namespace {

volatile sig_atomic_t g_interrupted = 0;

int free_port() {
  try {
    return comm::free_local_port();
  } catch (const std::exception& e) {
    throw Failure(std::string("launch: ") + e.what() + "; pass --master-port");
  }
}

// A job id unlikely to repeat: the launcher's pid and 64 random bits.
std::string fresh_job_id() {
  std::random_device rd;
  const std::uint64_t bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char text[40];
  std::snprintf(text, sizeof text, "%d-%016llx", static_cast<int>(getpid()), static_cast<unsigned long long>(bits));
  return text;
}

struct Worker {
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string out_buf, err_buf, last;
  bool exited = false;
  int status = 0;
};

// Writes the complete lines of `buf` with the rank prefix, keeps the rest.
void flush_lines(std::string& buf, std::ostream& to, int rank, std::string& last, bool all) {
  std::size_t start = 0, nl;
  while ((nl = buf.find('\n', start)) != std::string::npos || (all && start < buf.size())) {
    if (nl == std::string::npos) nl = buf.size();
    std::string line = buf.substr(start, nl - start);
    // A progress bar redraws with '\r': show only its latest state.
    if (auto cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    if (!line.empty()) {
      to << "[rank " << rank << "] " << line << "\n";
      last = line;
    }
    start = nl + 1;
  }
  buf.erase(0, std::min(start, buf.size()));
  to.flush();
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "ended";
}

// Forks rank r of `o` with the launcher's environment (RANK, WORLD_SIZE, ...)
// and its stdout and stderr on pipes.
Worker start_worker(const LaunchOptions& o, int r, int port, int restart, const std::string& job_id) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) throw Failure("launch: pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw Failure("launch: fork failed");
  if (pid == 0) {
    dup2(out[1], 1), dup2(err[1], 2);
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    setenv("RANK", std::to_string(r).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);  // Note [CPU process settings]; the user's own setting wins
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv("TRIDENT_RESTART_COUNT", std::to_string(restart).c_str(), 1);
    setenv("TRIDENT_JOB_ID", job_id.c_str(), 1);  // Note [Job ids] in comm/group.cc
    std::vector<char*> argv{const_cast<char*>("trident")};
    for (const auto& a : o.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::perror("trident launch: exec");
    _exit(127);
  }
  close(out[1]), close(err[1]);
  Worker w;
  w.pid = pid, w.out = out[0], w.err = err[0];
  return w;
}

// Waits up to 200 ms for output and relays each worker's complete lines
// with its rank prefix; closes a pipe at its end.
void relay_output(std::vector<Worker>& workers) {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, bool>> owner;  // rank, is stderr
  for (int r = 0; r < static_cast<int>(workers.size()); ++r) {
    if (workers[r].out >= 0) fds.push_back({workers[r].out, POLLIN, 0}), owner.push_back({r, false});
    if (workers[r].err >= 0) fds.push_back({workers[r].err, POLLIN, 0}), owner.push_back({r, true});
  }
  if (!fds.empty()) poll(fds.data(), fds.size(), 200);
  else usleep(200 * 1000);
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto& w = workers[owner[i].first];
    char buf[4096];
    const ssize_t n = read(fds[i].fd, buf, sizeof buf);
    auto& text = owner[i].second ? w.err_buf : w.out_buf;
    auto& to = owner[i].second ? std::cerr : std::cout;
    if (n > 0) {
      text.append(buf, n);
      flush_lines(text, to, owner[i].first, w.last, false);
    } else {
      flush_lines(text, to, owner[i].first, w.last, true);
      close(fds[i].fd);
      (owner[i].second ? w.err : w.out) = -1;
    }
  }
}

// Collects workers that ended; returns the first that failed (not 0, not
// 130 = interrupted) among them, or -1.
int reap(std::vector<Worker>& workers) {
  int failed = -1;
  for (int r = 0; r < static_cast<int>(workers.size()); ++r) {
    auto& w = workers[r];
    if (w.exited || waitpid(w.pid, &w.status, WNOHANG) != w.pid) continue;
    w.exited = true;
    const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
    const bool interrupted = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 130;
    if (!ok && !interrupted && failed < 0) failed = r;
  }
  return failed;
}

void signal_all(std::vector<Worker>& workers, int sig) {
  for (auto& w : workers)
    if (!w.exited) kill(w.pid, sig);
}

// How one start of the workers ended.
struct Outcome {
  int failed = -1;          // the first failed rank, or -1
  std::string why;          // "rank R was killed by signal 9 (Killed); its last message: ..."
  bool bad_input = false;   // that rank exited 2
};

// Starts every worker and relays their output until all have ended; when
// one fails the others get SIGTERM, then SIGKILL after grace_s.
Outcome run_workers(const LaunchOptions& o, int port, int restart, const std::string& job_id) {
  std::vector<Worker> workers;
  for (int r = 0; r < o.nproc; ++r) workers.push_back(start_worker(o, r, port, restart, job_id));
  int failed = -1;
  bool forwarded = false, killed = false;
  auto stop_start = std::chrono::steady_clock::time_point{};
  auto running = [&] {
    for (const auto& w : workers)
      if (!w.exited || w.out >= 0 || w.err >= 0) return true;
    return false;
  };
  while (running()) {
    relay_output(workers);
    if (const int f = reap(workers); f >= 0 && failed < 0) {
      failed = f;
      stop_start = std::chrono::steady_clock::now();
      signal_all(workers, SIGTERM);
    }
    if (g_interrupted && !forwarded) {
      forwarded = true;
      signal_all(workers, SIGINT);
    }
    if (failed >= 0 && !killed &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_start).count() > o.grace_s) {
      killed = true;
      signal_all(workers, SIGKILL);
    }
  }
  Outcome out;
  if (failed >= 0) {
    const auto& w = workers[failed];
    out.failed = failed;
    out.why = "rank " + std::to_string(failed) + " " + describe(w.status) +
              (w.last.empty() ? "" : "; its last message: " + w.last);
    out.bad_input = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 2;
  }
  return out;
}

}  // namespace

int launch(const LaunchOptions& o) {
  if (o.nproc < 1) throw InputError("launch --nproc " + std::to_string(o.nproc) + ": must be >= 1");
  if (o.args.empty())
    throw InputError("launch: give the subcommand after --, e.g. trident launch --nproc 2 -- train --config f.yaml");
  if (o.max_restarts < 0)
    throw InputError("launch --max-restarts " + std::to_string(o.max_restarts) + ": must be >= 0");
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // The job's id (Note [Job ids] in comm/group.cc): the user's TRIDENT_JOB_ID, or a fresh one.
  const char* given = std::getenv("TRIDENT_JOB_ID");
  const std::string job_id = given && *given ? given : fresh_job_id();
  std::vector<std::string> failures;
  for (int restart = 0;; ++restart) {
    // A fresh port each start: the old rendezvous may still hold its own.
    const int port = o.master_port ? o.master_port : free_port();
    const auto out = run_workers(o, port, restart, job_id);
    if (out.failed < 0) return g_interrupted ? 130 : 0;
    std::cerr << "trident: launch: " << out.why << "\n";
    // A worker that found bad input (exit 2) makes the job's exit 2 too.
    if (out.bad_input) return 2;
    failures.push_back(out.why);
    if (g_interrupted) return 130;
    if (restart == o.max_restarts) break;
    std::cerr << "trident: launch: restart " << restart + 1 << " of " << o.max_restarts << ": starting all "
              << o.nproc << " workers again\n";
  }
  if (o.max_restarts > 0) {
    std::cerr << "trident: launch: gave up after " << o.max_restarts << " restart"
              << (o.max_restarts == 1 ? "" : "s") << "; failures:";
    for (std::size_t i = 0; i < failures.size(); ++i) std::cerr << (i ? ";" : "") << " start " << i + 1 << ": " << failures[i];
    std::cerr << "\n";
  }
  return 1;
}

}  // namespace trident::cli
