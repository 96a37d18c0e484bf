// Files that are either whole or absent, and JSON read with errors a person
// can act on.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace trident {

// Writes `text` to `path` atomically: a temporary file beside it, flushed
// and fsync'ed, renamed over `path`, then the directory fsync'ed. A crash at
// any point leaves either the old file or the new one. Throws Failure naming
// the path when any step fails (disk full, no permission, fsync error).
void write_file_atomic(const std::string& path, const std::string& text);

// fsync of a file or directory; throws Failure naming the path.
void fsync_path(const std::string& path, bool directory);

// The whole file; throws InputError "<what> <path>: cannot read it" when it
// is missing or unreadable.
std::string read_text_file(const std::string& path, const std::string& what);

// The file parsed as JSON; throws InputError naming `what`, the path and the
// parser's position when it is missing or malformed.
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace trident
