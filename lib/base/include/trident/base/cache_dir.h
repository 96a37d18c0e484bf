// Where trident keeps what it measured or indexed on this machine.
#pragma once

#include <string>

namespace trident {

// $TRIDENT_CACHE_DIR, else $XDG_CACHE_HOME/trident, else ~/.cache/trident
// (/tmp/.cache/trident without a HOME). Not created here.
std::string cache_dir();

}  // namespace trident
