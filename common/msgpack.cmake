# msgpack-cxx, found under either of its CMake names: `msgpack-cxx` (target msgpack-cxx) from 6.0 on
# (Debian 13), `msgpack` (target msgpackc-cxx) before (Debian 12). Sets CONVOY_MSGPACK to the target to link.
# Included by the top-level CMakeLists.txt and by tests/fuzz, which is a project of its own.
find_package(msgpack-cxx CONFIG QUIET)
if(TARGET msgpack-cxx)
  set(CONVOY_MSGPACK msgpack-cxx)
else()
  find_package(msgpack CONFIG REQUIRED)
  set(CONVOY_MSGPACK msgpackc-cxx)
endif()
