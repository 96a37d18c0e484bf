#include "trident/base/env.h"

#include <cstdlib>

namespace trident {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace trident
