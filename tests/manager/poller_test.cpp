// Poller on real epoll and eventfds: events come back with their tags, and every
// epoll_ctl the kernel refuses is an error naming the call.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>

#include "core/poller.hpp"

namespace sandpool::core {
namespace {

UniqueFd event_fd() { return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

void ring(const UniqueFd& fd) {
  const std::uint64_t one = 1;
  REQUIRE(::write(fd.get(), &one, sizeof one) == sizeof one);
}

}  // namespace

TEST_CASE("a poller reports each ready fd once, under its tag") {
  auto p = Poller::create();
  REQUIRE(p);
  UniqueFd a = event_fd(), b = event_fd();
  REQUIRE(p->add(a.get(), 17));
  REQUIRE(p->add(b.get(), 42));
  epoll_event ev[4];
  auto n = p->wait(ev, 4, 0);
  REQUIRE(n);
  CHECK(*n == 0);  // nothing ready: a zero timeout returns at once
  ring(b);
  n = p->wait(ev, 4, -1);
  REQUIRE(n);
  REQUIRE(*n == 1);
  // Read by value: epoll_event is packed on x86-64, and CHECK would bind a reference to the
  // misaligned member (clang's UBSan reports it).
  const std::uint64_t tag = ev[0].data.u64;
  CHECK(tag == 42);
}

TEST_CASE("a removed fd is not reported any more") {
  auto p = Poller::create();
  REQUIRE(p);
  UniqueFd a = event_fd();
  REQUIRE(p->add(a.get(), 1));
  ring(a);
  REQUIRE(p->remove(a.get()));
  epoll_event ev[1];
  auto n = p->wait(ev, 1, 0);
  REQUIRE(n);
  CHECK(*n == 0);
}

TEST_CASE("epoll_ctl failures are returned naming the call and the errno") {
  auto p = Poller::create();
  REQUIRE(p);
  UniqueFd a = event_fd();
  SECTION("adding an fd twice") {
    REQUIRE(p->add(a.get(), 1));
    const Status s = p->add(a.get(), 1);
    CHECK(s.sys_errno() == EEXIST);
    CHECK(s.message().find("epoll_ctl(EPOLL_CTL_ADD)") != std::string::npos);
  }
  SECTION("adding a closed fd") {
    const int closed = a.release();
    ::close(closed);
    CHECK(p->add(closed, 1).sys_errno() == EBADF);
  }
  SECTION("adding a file epoll cannot watch (a regular file)") {
    UniqueFd f(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(f);
    CHECK(p->add(f.get(), 1).sys_errno() == EPERM);
  }
  SECTION("removing an fd that is not watched") {
    const Status s = p->remove(a.get());
    CHECK(s.sys_errno() == ENOENT);
    CHECK(s.message().find("epoll_ctl(EPOLL_CTL_DEL)") != std::string::npos);
  }
}

}  // namespace sandpool::core
