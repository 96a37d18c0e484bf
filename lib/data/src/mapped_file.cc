#include "mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trident/data/dataset.h"

namespace trident::data {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot be opened (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw DataError(path + ": cannot be read (" + std::strerror(e) + ")");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw DataError(path + ": cannot be mapped (" + std::strerror(e) + ")");
    data_ = static_cast<const std::uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

std::string read_range(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot be read (" + std::strerror(errno) + "; it was there when indexed)");
  std::string bytes(size, '\0');
  std::uint64_t done = 0;
  while (done < size) {
    const auto n = ::pread(fd, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw DataError(path + ": " + (n == 0 ? std::string("is shorter than when it was indexed (") + std::to_string(offset + done) +
                                                  " bytes; the index says " + std::to_string(offset + size) + ")"
                                            : "cannot be read (" + std::string(std::strerror(e)) + ")"));
    }
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace trident::data
