#include "trident/base/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trident/base/error.h"

namespace trident {

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Failure("cannot open " + path + " to flush it to disk: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Failure("cannot flush " + path + " to disk: " + std::strerror(err));
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const auto tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw Failure("cannot write " + path + ": cannot create " + tmp + ": " + std::strerror(errno));
      out << text;
      if (!out.flush()) throw Failure("cannot write " + path + ": disk full or I/O error");
    }
    fsync_path(tmp, false);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw Failure("cannot write " + path + ": " + ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  const auto dir = std::filesystem::path(path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), true);
}

namespace detail {

std::string read_file(const std::string& path, const std::string& what, std::string& problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problem = what + " " + path + ": cannot read it (" + std::strerror(errno) + ")";
    return {};
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json parse_json(const std::string& text, const std::string& path, const std::string& what,
                          std::string& problem) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    problem = what + " " + path + " is not valid JSON: " + e.what();
    return {};
  }
}

}  // namespace detail

int poll_retrying(pollfd* fds, std::size_t count, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int rc = ::poll(fds, static_cast<nfds_t>(count), timeout_ms);
    if (rc >= 0 || errno != EINTR) return rc;
    if (timeout_ms < 0) continue;  // no deadline
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    timeout_ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
  }
}

}  // namespace trident
