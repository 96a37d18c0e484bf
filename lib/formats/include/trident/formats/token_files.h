// Token files for language models, read in place (Note [Token streams]):
// nanoGPT's bare `.bin` of uint16 ids, and Megatron's indexed datasets, a
// `.bin` of ids beside an `.idx` that says their dtype and documents.
#pragma once

#include <cstdint>
#include <string>

#include "trident/formats/file_headers.h"

namespace trident::formats {

// Note [Token streams]
// ~~~~~~~~~~~~~~~~~~~~
// A token file is one stream of ids, the documents one after another (as
// nanoGPT's prepare.py writes them, and as Megatron's GPT dataset joins
// them). Sample n of a model with T positions is the T + 1 ids from
// n * T: the model reads the first T, the labels are the last T (the next
// token of each). Samples = (ids - 1) / T; the ids after the last whole
// sample are not read. The order of samples is the sampler's, like every
// dataset's (data/sampler.h); Megatron's own document shuffle is not
// reproduced.
struct TokenFile {
  std::string bin;              // the ids
  int item_bytes = 2;           // 1, 2, 4 or 8
  bool is_signed = false;
  std::uint64_t tokens = 0;     // ids in the stream
  std::uint64_t documents = 0;  // Megatron: its sequences; nanoGPT: 0 (unknown)
};

// `path` is FILE.bin: with FILE.idx beside it, a Megatron indexed dataset
// (checked against the .bin's length); alone, nanoGPT's uint16 ids. Throws
// DataError naming the file for anything else.
TokenFile open_token_file(const std::string& path);

// A Megatron `.idx` (its bytes) for a `.bin` of `bin_bytes`: magic
// "MMIDIDX\0\0", version 1, the dtype code, the sequence and document
// counts, sizes, pointers and document indices — each pointer the sum of
// the sizes before it (in bytes), the last ending at the .bin's end.
TokenFile parse_megatron_idx(const std::string& bytes, std::uint64_t bin_bytes, const std::string& origin);

}  // namespace trident::formats
