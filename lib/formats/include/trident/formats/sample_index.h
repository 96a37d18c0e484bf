// Where every sample of an image dataset lies, found once and cached
// (Note [Sample indexes]): image folders and WebDataset tar shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trident/formats/file_headers.h"

namespace trident::formats {

// Note [Sample indexes]
// ~~~~~~~~~~~~~~~~~~~~~
// An image dataset is a list of samples, each an encoded image somewhere in
// a file (a whole file, or a tar member at an offset) and a class id. The
// list is built by scanning once and written to the cache directory
// (`<cache>/index/<hash of the path>.txt`, atomically); a later start reads
// it back when every stamp still holds — the modification time and size of
// the root, each class folder or each shard — and scans again otherwise.
// Its identity (a hash of its text) goes into checkpoints: a run resumes
// only on the samples it started with.
//
// Image folders follow torchvision's ImageFolder: classes are the sorted
// names of the root's subfolders, samples each class's files with an image
// extension (.jpg, .jpeg, .png, any case; sorted, subfolders included),
// class by class. Other files are skipped and counted. A root with no
// class folder, or a class folder with no image, is a DataError naming it.
//
// Note [Tar shards]
// ~~~~~~~~~~~~~~~~~
// WebDataset's convention: `name-{000000..000099}.tar` names shards (brace
// ranges expand, zero-padded as written); inside, the members whose paths
// share everything before the basename's first dot form one sample
// (`n01440764_10026.jpg` and `n01440764_10026.cls`). A sample is its image
// (.jpg, .jpeg or .png) and its label: the integer text of `.cls`, or
// `.json` holding an integer or an object with an integer "label". A key
// with an image and no label, or a label and no image, or a negative label
// is a DataError naming the shard and the key; other members are ignored.
struct SampleRef {
  std::uint32_t file = 0;    // into SampleIndex::files
  std::uint64_t offset = 0;  // of the encoded image in the file
  std::uint64_t size = 0;
  std::int64_t label = 0;
};

struct Stamp {
  std::string path;
  std::int64_t mtime_ns = 0;
  std::uint64_t size = 0;
  bool operator==(const Stamp& o) const { return path == o.path && mtime_ns == o.mtime_ns && size == o.size; }
};

struct SampleIndex {
  std::string kind;                  // "images" or "tar"
  std::string root;                  // the folder, or the shards' pattern
  std::vector<std::string> classes;  // images: the folders' names; tar: empty (ids only)
  std::vector<std::string> files;    // absolute paths
  std::vector<SampleRef> samples;
  std::vector<Stamp> stamps;         // what must not change for the index to hold
  std::uint64_t skipped = 0;         // files, or tar members, that are no sample's part
  std::int64_t num_classes() const;  // classes, or the largest label + 1
  std::uint64_t bytes() const;       // the encoded images' total
};

// Scans (no cache).
SampleIndex scan_image_folder(const std::string& root);
SampleIndex scan_tar_shards(const std::string& pattern);
// `name-{000..009}.tar` -> the ten names; a pattern without braces is itself.
// Throws DataError for a malformed or reversed range, or one of more than
// 10^7 names.
std::vector<std::string> expand_braces(const std::string& pattern);

// The index as text, and back. parse_index throws DataError naming `origin`
// for anything malformed (the cache is then rebuilt, not trusted).
std::string write_index(const SampleIndex& index);
SampleIndex parse_index(const std::string& text, const std::string& origin);
// FNV-1a of write_index's text: the index's identity.
std::uint64_t index_identity(const SampleIndex& index);

// The stamps of `index` now; true when every one still holds.
bool index_current(const SampleIndex& index);

// The cached index of `kind` ("images" or "tar") at `path` from
// `cache_dir`, or a fresh scan written there (when the directory can be
// written; a read-only cache only costs the scan). `rescanned` says which.
SampleIndex load_index(const std::string& kind, const std::string& path, const std::string& cache_dir,
                       bool* rescanned = nullptr);

}  // namespace trident::formats
