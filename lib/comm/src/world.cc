#include "trident/comm/world.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <cstdlib>
#include <optional>
#include <vector>

extern char** environ;

namespace trident::comm {
namespace {

struct Source {
  const char* launcher;
  const char *rank, *size, *local, *local_size;
};

const Source kSources[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

std::optional<int> integer(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    const long v = std::stol(it->second, &used);
    if (used != it->second.size() || v < 0 || v > 1'000'000) throw std::out_of_range("range");
    return static_cast<int>(v);
  } catch (const std::exception&) {
    throw CommError("environment: " + name + "='" + it->second + "' is not a non-negative integer", ErrorKind::kBadInput);
  }
}

// SLURM_TASKS_PER_NODE lists tasks per node compressed, "2(x3),1": this
// node's entry is the SLURM_NODEID-th of the expanded list.
std::optional<int> slurm_tasks_here(const std::map<std::string, std::string>& env) {
  auto list = env.find("SLURM_TASKS_PER_NODE");
  auto node = integer(env, "SLURM_NODEID");
  if (list == env.end() || !node) return std::nullopt;
  int index = 0;
  std::size_t pos = 0;
  const std::string& text = list->second;
  while (pos < text.size()) {
    std::size_t used = 0;
    int tasks = 0, repeat = 1;
    try {
      tasks = std::stoi(text.substr(pos), &used);
      pos += used;
      if (text.compare(pos, 2, "(x") == 0) {
        repeat = std::stoi(text.substr(pos + 2), &used);
        pos += 2 + used + 1;  // the number and ')'
      }
    } catch (const std::exception&) {
      throw CommError("environment: SLURM_TASKS_PER_NODE='" + text + "' is not a list like 2(x3),1",
                      ErrorKind::kBadInput);
    }
    if (*node < index + repeat) return tasks;
    index += repeat;
    if (pos < text.size() && text[pos] == ',') ++pos;
  }
  return std::nullopt;
}

}  // namespace

WorldInfo world_from_env(const std::map<std::string, std::string>& env) {
  WorldInfo w;
  std::optional<WorldInfo> first;
  std::string first_vars;
  for (const auto& s : kSources) {
    auto rank = integer(env, s.rank), size = integer(env, s.size), local = integer(env, s.local);
    if (!rank && !size) continue;
    if (!rank || !size)
      throw CommError(std::string("environment: ") + (rank ? s.size : s.rank) + " is missing but " +
                      (rank ? s.rank : s.size) + " is set (" + s.launcher + ")", ErrorKind::kBadInput);
    WorldInfo here;
    here.rank = *rank, here.world_size = *size, here.local_rank = local.value_or(*rank);
    auto local_size = integer(env, s.local_size);
    if (!local_size && std::string(s.launcher) == "srun") local_size = slurm_tasks_here(env);
    here.local_size = std::max(1, std::min(local_size.value_or(*size), *size));
    here.launcher = s.launcher;
    if (here.world_size < 1 || here.rank >= here.world_size)
      throw CommError(std::string("environment: ") + s.rank + "=" + std::to_string(here.rank) + " must be below " +
                      s.size + "=" + std::to_string(here.world_size), ErrorKind::kBadInput);
    const std::string vars = std::string(s.rank) + "=" + std::to_string(here.rank) + ", " + s.size + "=" +
                             std::to_string(here.world_size) + " (" + s.launcher + ")";
    if (first && (first->rank != here.rank || first->world_size != here.world_size))
      throw CommError("environment: launchers disagree: " + first_vars + " but " + vars, ErrorKind::kBadInput);
    if (!first) first = here, first_vars = vars;
  }
  if (first) w = *first;
  for (const char* var : {"TRIDENT_JOB_ID", "SLURM_JOB_ID"}) {
    auto it = env.find(var);
    if (it != env.end() && !it->second.empty()) {
      w.job_id = it->second;
      break;
    }
  }
  w.restart_count = integer(env, "TRIDENT_RESTART_COUNT").value_or(0);
  w.min_devices = integer(env, "TRIDENT_MIN_DEVICES").value_or(0);
  if (w.world_size > 1) {
    auto addr = env.find("MASTER_ADDR");
    if (addr == env.end() || addr->second.empty())
      throw CommError("environment: MASTER_ADDR is missing; set it to the host of rank 0 (e.g. export MASTER_ADDR=node001)");
    w.master_addr = addr->second;
    auto port = integer(env, "MASTER_PORT");
    if (!port)
      throw CommError("environment: MASTER_PORT is missing; set it to a free TCP port on rank 0's host (e.g. 29500)");
    if (*port < 1 || *port > 65535)
      throw CommError("environment: MASTER_PORT=" + std::to_string(*port) + " is not a TCP port (1..65535)", ErrorKind::kBadInput);
    w.master_port = *port;
  }
  return w;
}

WorldInfo world_from_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return world_from_env(env);
}

void report_started() {
  static bool reported = false;
  const char* fd_text = std::getenv("TRIDENT_READY_FD");
  if (reported || !fd_text) return;
  reported = true;
  const int fd = std::atoi(fd_text);
  if (fd <= 2) return;  // never a standard stream
  const char byte = 1;
  if (write(fd, &byte, 1) != 1) return;  // a launcher that is gone learns nothing; the rendezvous fails on its own
  close(fd);
}

std::pair<int, int> ephemeral_ports() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && 0 < low && low <= high && high <= 65535) return {low, high};
  return {32768, 60999};
}

namespace {

// Binds a TCP socket to 127.0.0.1:`port` (0: the kernel picks) and releases
// it; the port it got, or 0 when the bind failed.
int try_port(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

}  // namespace

// See Note [Free ports] (world.h).
int free_local_port() {
  const int below = ephemeral_ports().first;
  const int lowest = std::max(1024, below - 16384);
  if (below - lowest >= 64) {
    std::mt19937 draw(std::random_device{}());
    std::uniform_int_distribution<int> port(lowest, below - 1);
    for (int attempt = 0; attempt < 64; ++attempt)
      if (const int got = try_port(port(draw))) return got;
  }
  if (const int got = try_port(0)) return got;
  throw CommError("cannot find a free TCP port on 127.0.0.1");
}

}  // namespace trident::comm
