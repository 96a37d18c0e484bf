// Reading the environment: one helper for every component. Torch-free.
#pragma once

#include <string>

namespace trident {

// The value of environment variable `name`, or "" when it is unset.
std::string env_or_empty(const char* name);

}  // namespace trident
