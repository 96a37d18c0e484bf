// The training config's keys (internal to lib/config; key_table.cc): the
// table config.cc reads, writes and documents.
#pragma once

#include <string>
#include <vector>

#include "config_keys.h"

namespace trident::config::config_keys {

// Every key, in dependency order (a key's default and range may use keys
// above it).
const std::vector<Key>& keys();
// Sections in the order of the table: "" (top level), "model", "data", ...
std::vector<std::string> sections();
// The keys allowed directly in `section` (top level: its keys and the sections).
std::vector<std::string> allowed_in(const std::string& section);
// Whether the config trains on Fashion-MNIST.
bool fashion(const TrainConfig& c);

}  // namespace trident::config::config_keys
