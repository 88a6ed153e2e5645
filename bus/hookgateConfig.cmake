# find_package(hookgate) → hookgate::client, the C++ publisher client library (bus/publisher.hpp,
# included as "bus/publisher.hpp"). Its dependencies come from the system, as for the gateway:
# libzmq with cppzmq, spdlog, RapidJSON (headers).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(cppzmq)
find_dependency(spdlog)
find_dependency(RapidJSON)  # headers only (bus/publisher.hpp includes gateway/event.hpp)
include("${CMAKE_CURRENT_LIST_DIR}/hookgateTargets.cmake")
