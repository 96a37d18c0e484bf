#include "trident/base/cache_dir.h"

#include "trident/base/env.h"

namespace trident {

std::string cache_dir() {
  if (auto dir = env_or_empty("TRIDENT_CACHE_DIR"); !dir.empty()) return dir;
  if (auto xdg = env_or_empty("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/trident";
  const auto home = env_or_empty("HOME");
  return (home.empty() ? std::string("/tmp") : home) + "/.cache/trident";
}

}  // namespace trident
