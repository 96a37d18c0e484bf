// Files that are either whole or absent, and JSON read with errors a person
// can act on.
#pragma once

#include <poll.h>

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"

namespace trident {

// Writes `text` to `path` atomically: a temporary file beside it, flushed
// and fsync'ed, renamed over `path`, then the directory fsync'ed. A crash at
// any point leaves either the old file or the new one. Throws Failure naming
// the path when any step fails (disk full, no permission, fsync error).
void write_file_atomic(const std::string& path, const std::string& text);

// fsync of a file or directory; throws Failure naming the path.
void fsync_path(const std::string& path, bool directory);

namespace detail {
// The file's text, or why not in `problem`; parsed as JSON when `json`.
std::string read_file(const std::string& path, const std::string& what, std::string& problem);
nlohmann::json parse_json(const std::string& text, const std::string& path, const std::string& what,
                          std::string& problem);
}  // namespace detail

// The whole file; throws E (a trident::Error type taking a message, e.g. the
// caller's PlanError) "<what> <path>: cannot read it (<reason>)" when it is
// missing or unreadable.
template <class E = InputError>
std::string read_text_file(const std::string& path, const std::string& what) {
  std::string problem;
  auto text = detail::read_file(path, what, problem);
  if (!problem.empty()) throw E(problem);
  return text;
}

// The file parsed as JSON; throws E naming `what`, the path and the
// parser's position when it is missing or malformed.
template <class E = InputError>
nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::string problem;
  auto doc = detail::parse_json(read_text_file<E>(path, what), path, what, problem);
  if (!problem.empty()) throw E(problem);
  return doc;
}

// poll(2) on `count` descriptors, retried with the time left when a signal
// interrupts it (EINTR); returns what poll returns otherwise (0 on timeout).
int poll_retrying(pollfd* fds, std::size_t count, int timeout_ms);

}  // namespace trident
