// gzip files (io/gzip_file.h), inflated by zlib.
#include "mixprec/io/gzip_file.h"

#include <zlib.h>

#include "mixprec/core/error.h"
#include "mixprec/io/regular_file.h"

namespace mixprec::io {

std::string read_gzip_file(const std::filesystem::path& path, uint64_t max_bytes,
                           const std::string& where) {
  // Stored (incompressible) data grows by a few bytes per 64 KiB block: the compressed file
  // is at most about the bound too.
  const std::string packed = read_regular_file(path, max_bytes + (1 << 20), where);
  z_stream z{};
  MIXPREC_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, where, "zlib could not start");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  int status = Z_OK;
  char buffer[1 << 16];
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      throw Error(where, "inflates past " + std::to_string(max_bytes >> 20) + " MiB");
    }
    if (status == Z_STREAM_END && z.avail_in > 0) {  // another gzip member follows
      inflateReset(&z);
      continue;
    }
    if (status != Z_OK) break;
    if (z.avail_in == 0 && z.avail_out != 0) break;  // all input used, and no more output
  }
  const std::string message = z.msg ? z.msg : "";
  inflateEnd(&z);
  MIXPREC_CHECK(
      status == Z_STREAM_END, where,
      status == Z_OK || status == Z_BUF_ERROR
          ? std::string("is truncated (the gzip stream ends early)")
          : "is not a valid gzip file (" + (message.empty() ? "zlib error" : message) + ")");
  return out;
}

}  // namespace mixprec::io
