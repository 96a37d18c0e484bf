// A file mapped read-only into memory (private to data/src): pages are read
// when touched and belong to the page cache, not the process's heap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace trident::data {

class MappedFile {
 public:
  // Throws DataError naming `path` when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// Bytes [offset, offset + size) of `path`, read with pread; throws DataError
// naming the file when it is gone or shorter than that.
std::string read_range(const std::string& path, std::uint64_t offset, std::uint64_t size);

}  // namespace trident::data
