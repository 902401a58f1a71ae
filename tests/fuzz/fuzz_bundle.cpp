// Kernel bundles, through the real file path: the input is written to a memfd (a regular
// file that lives in memory) and loaded by name.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "compiler/kernel_store.h"
#include "fuzz_common.h"

GEARBOX_FUZZ_TARGET({
  const int fd = ::memfd_create("bundle", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < input.size()) {
    const ssize_t n = ::write(fd, input.data() + done, input.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  try {
    (void)gearbox::loadKernelBundle("/proc/self/fd/" + std::to_string(fd));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
})
