#include "launch.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <stdexcept>

#include "trident/base/files.h"
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

// Note [Slots that fail to start]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A slot is a place a worker runs: slot s is LOCAL_RANK s (a core set, a
// GPU, or a host through --slot-command). With --min-devices the launcher
// tells a slot that cannot start a worker from a job that failed: each
// worker gets the write end of a pipe (TRIDENT_READY_FD) and writes one
// byte once it has reached the rendezvous store (comm::report_started). If
// the job's first failure is a worker that exited with an error of its own
// (not 2 = bad input, not a signal) without having written it, its slot is
// dropped. A rank that cannot reach the store fails before the others stop
// waiting for it (see Note [Arrivals] in comm/world.h), so a cut-off host is
// the first failure. The slot is dropped,
// and the job starts again on K of the slots left — ranks 0..K-1 in slot
// order, WORLD_SIZE K — where K is what LaunchOptions::devices_for allows
// (`trident train` asks its planner; otherwise every slot left), as long
// as K >= --min-devices; the workers then re-plan for K devices
// (docs/reliability.md). Without --min-devices every failure is the job's
// and the slots never change.
struct Worker {
  pid_t pid = -1;
  int slot = 0;
  int out = -1, err = -1, ready = -1;
  std::string out_buf, err_buf, last;
  bool exited = false, started = false;
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

// One start of the job: its slots and where its rendezvous is.
struct Start {
  std::vector<int> slots;  // the slots in use; rank r runs on slots[r]
  int port = 0, restart = 0;
  std::string job_id;
  std::string binary;      // this program's path, for a slot command
};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// This program's path (what /proc/self/exe links to).
std::string own_path() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Failure("launch: cannot read /proc/self/exe");
  return std::string(path, static_cast<std::size_t>(n));
}

// Forks rank r of start `s` with the launcher's environment (RANK,
// WORLD_SIZE, ...), its stdout and stderr on pipes and, when elastic, the
// pipe it reports its start on.
Worker start_worker(const LaunchOptions& o, const Start& s, int r) {
  int out[2], err[2], ready[2] = {-1, -1};
  if (pipe(out) != 0 || pipe(err) != 0 || (o.min_devices > 0 && pipe(ready) != 0)) throw Failure("launch: pipe failed");
  const std::string world = std::to_string(s.slots.size());
  const pid_t pid = fork();
  if (pid < 0) throw Failure("launch: fork failed");
  if (pid == 0) {
    dup2(out[1], 1), dup2(err[1], 2);
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    if (ready[0] >= 0) close(ready[0]), setenv("TRIDENT_READY_FD", std::to_string(ready[1]).c_str(), 1);
    if (o.min_devices > 0) setenv("TRIDENT_MIN_DEVICES", std::to_string(o.min_devices).c_str(), 1);
    setenv("RANK", std::to_string(r).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(s.slots[r]).c_str(), 1);
    setenv("WORLD_SIZE", world.c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", world.c_str(), 1);
    setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(s.port).c_str(), 1);
    setenv("TRIDENT_RESTART_COUNT", std::to_string(s.restart).c_str(), 1);
    setenv("TRIDENT_JOB_ID", s.job_id.c_str(), 1);  // See Note [Job ids] in comm/world.h
    // With a slot command: sh -c 'COMMAND "$0" "$@"' BINARY ARGS...
    const std::string command = replace_all(o.slot_command, "{slot}", std::to_string(s.slots[r])) + " \"$0\" \"$@\"";
    std::vector<char*> argv;
    if (!o.slot_command.empty())
      for (const char* a : {"sh", "-c", command.c_str()}) argv.push_back(const_cast<char*>(a));
    argv.push_back(const_cast<char*>(o.slot_command.empty() ? "trident" : s.binary.c_str()));
    for (const auto& a : o.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(o.slot_command.empty() ? "/proc/self/exe" : "/bin/sh", argv.data());
    std::perror("trident launch: exec");
    _exit(127);
  }
  close(out[1]), close(err[1]);
  if (ready[1] >= 0) close(ready[1]);
  Worker w;
  w.pid = pid, w.slot = s.slots[r], w.out = out[0], w.err = err[0], w.ready = ready[0];
  return w;
}

// Reads a worker's start report if it is there; closes the pipe once it
// has the byte or the pipe has ended. Does not block when the pipe is
// readable (poll said so, or the worker has exited).
void read_report(Worker& w) {
  char byte = 0;
  if (read(w.ready, &byte, 1) == 1) w.started = true;
  close(w.ready);
  w.ready = -1;
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
  const std::size_t outputs = fds.size();
  for (auto& w : workers)
    if (w.ready >= 0) fds.push_back({w.ready, POLLIN, 0});
  if (!fds.empty()) poll_retrying(fds.data(), fds.size(), 200);
  else usleep(200 * 1000);
  for (std::size_t i = outputs, r = 0; i < fds.size(); ++i) {
    while (workers[r].ready != fds[i].fd) ++r;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_report(workers[r]);
  }
  for (std::size_t i = 0; i < outputs; ++i) {
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
    const bool interrupted = WIFEXITED(w.status) && WEXITSTATUS(w.status) == kExitInterrupted;
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
  bool bad_input = false;   // that rank exited kExitBadInput
  int lost_slot = -1;       // elastic: a slot whose worker failed before the rendezvous, or -1
};

// Whether a worker ended on its own with a failure (an exit code other than
// 0, 2 = bad input, 130 = interrupted), not by a signal.
bool failed_on_its_own(const Worker& w) {
  if (!WIFEXITED(w.status)) return false;
  const int code = WEXITSTATUS(w.status);
  return code != kExitOk && code != kExitBadInput && code != kExitInterrupted;
}

// See Note [Slots that fail to start]: whether the first failure, worker w,
// failed on its own before it reached the rendezvous.
bool never_started(Worker& w) {
  if (w.ready >= 0) read_report(w);  // it has exited: the read cannot block
  return !w.started && failed_on_its_own(w);
}

// Starts every worker and relays their output until all have ended; when
// one fails the others get SIGTERM, then SIGKILL after grace_s.
Outcome run_workers(const LaunchOptions& o, const Start& s) {
  std::vector<Worker> workers;
  for (int r = 0; r < static_cast<int>(s.slots.size()); ++r) workers.push_back(start_worker(o, s, r));
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
  if (failed < 0) return out;
  auto& w = workers[failed];
  const bool lost = o.min_devices > 0 && never_started(w);
  out.failed = failed;
  out.why = "rank " + std::to_string(failed) + " " + describe(w.status) +
            (lost ? " before it reached the rendezvous (slot " + std::to_string(w.slot) + ")" : "") +
            (w.last.empty() ? "" : "; its last message: " + w.last);
  out.bad_input = WIFEXITED(w.status) && WEXITSTATUS(w.status) == kExitBadInput;
  if (lost) out.lost_slot = w.slot;
  return out;
}

std::string slot_list(const std::vector<int>& slots) {
  std::string text;
  for (int s : slots) text += (text.empty() ? "" : ", ") + std::to_string(s);
  return text;
}

void print_give_up(const std::string& why, const std::vector<std::string>& failures) {
  std::cerr << "trident: launch: " << why << "; failures:";
  for (std::size_t i = 0; i < failures.size(); ++i) std::cerr << (i ? ";" : "") << " start " << i + 1 << ": " << failures[i];
  std::cerr << "\n";
}

}  // namespace

int launch(const LaunchOptions& o) {
  if (o.nproc < 1) throw InputError("launch --nproc " + std::to_string(o.nproc) + ": must be >= 1");
  if (o.args.empty())
    throw InputError("launch: give the subcommand after --, e.g. trident launch --nproc 2 -- train --config f.yaml");
  if (o.max_restarts < 0)
    throw InputError("launch --max-restarts " + std::to_string(o.max_restarts) + ": must be >= 0");
  if (o.master_addr.empty()) throw InputError("launch --master-addr: must not be empty (e.g. 127.0.0.1)");
  if (o.min_devices < 0 || o.min_devices > o.nproc)
    throw InputError("launch --min-devices " + std::to_string(o.min_devices) + ": must be from 1 to --nproc (" +
                     std::to_string(o.nproc) + ")");
  if (o.min_devices > 0 && o.max_restarts == 0)
    throw InputError("launch --min-devices " + std::to_string(o.min_devices) +
                     " needs --max-restarts >= 1: going on with fewer devices starts the workers again");
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  Start start;
  // The job's id (see Note [Job ids] in comm/world.h): the user's TRIDENT_JOB_ID, or a fresh one.
  const char* given = std::getenv("TRIDENT_JOB_ID");
  start.job_id = given && *given ? given : fresh_job_id();
  for (int s = 0; s < o.nproc; ++s) start.slots.push_back(s);
  if (!o.slot_command.empty()) start.binary = own_path();
  std::vector<int> live = start.slots;  // every slot that has not failed to start
  std::vector<std::string> failures;
  for (;; ++start.restart) {
    // A fresh port each start: the old rendezvous may still hold its own.
    start.port = o.master_port ? o.master_port : free_port();
    const auto out = run_workers(o, start);
    if (out.failed < 0) return g_interrupted ? kExitInterrupted : kExitOk;
    std::cerr << "trident: launch: " << out.why << "\n";
    // A worker that found bad input (exit 2) makes the job's exit 2 too.
    if (out.bad_input) return kExitBadInput;
    failures.push_back(out.why);
    if (g_interrupted) return kExitInterrupted;
    const std::size_t before = start.slots.size();
    if (out.lost_slot >= 0) {  // See Note [Slots that fail to start]
      live.erase(std::find(live.begin(), live.end(), out.lost_slot));
      const int left = static_cast<int>(live.size());
      const int use = left < o.min_devices ? 0 : o.devices_for ? o.devices_for(left) : left;
      std::cerr << "trident: launch: slot " << out.lost_slot << " failed to start; " << left << " of " << o.nproc
                << " devices left (slots " << slot_list(live) << ")";
      if (use > 0 && use < left) std::cerr << ", of which the job can be planned for " << use;
      std::cerr << "; --min-devices " << o.min_devices << "\n";
      if (use < o.min_devices) {
        print_give_up("gave up: fewer devices than --min-devices " + std::to_string(o.min_devices) + " can run the job",
                      failures);
        return kExitFailure;
      }
      start.slots.assign(live.begin(), live.begin() + use);
    }
    if (start.restart == o.max_restarts) break;
    std::cerr << "trident: launch: restart " << start.restart + 1 << " of " << o.max_restarts << ": starting "
              << (start.slots.size() == before ? "all " : "") << start.slots.size() << " workers again"
              << (start.slots.size() == before ? "" : " (slots " + slot_list(start.slots) + "); the job re-plans for them")
              << "\n";
  }
  if (o.max_restarts > 0)
    print_give_up("gave up after " + std::to_string(o.max_restarts) + " restart" + (o.max_restarts == 1 ? "" : "s"),
                  failures);
  return kExitFailure;
}

}  // namespace trident::cli
