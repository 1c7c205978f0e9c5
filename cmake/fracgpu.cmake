# Helper functions shared by every component's CMakeLists.txt.

# fracgpu_add_test(NAME SOURCES src... [LIBS lib...] [LABELS label...])
# A GoogleTest executable registered with CTest (one CTest entry per test case).
function(fracgpu_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

# fracgpu_add_fuzzer(NAME SOURCES src... [LIBS lib...] CORPUS dir)
# A fuzz target defining LLVMFuzzerTestOneInput. With FRACGPU_FUZZ (clang) it links
# libFuzzer; otherwise it links tests/fuzz/corpus_main.cc, which replays every file of
# CORPUS once, and is registered as a CTest test, so the corpus runs with the suite.
function(fracgpu_add_fuzzer name)
  cmake_parse_arguments(ARG "" "CORPUS" "SOURCES;LIBS" ${ARGN})
  if(FRACGPU_FUZZ)
    add_executable(${name} ${ARG_SOURCES})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus_main.cc)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  add_test(NAME ${name}.corpus COMMAND ${name} ${ARG_CORPUS})
  set_tests_properties(${name}.corpus PROPERTIES LABELS fuzz)
endfunction()

# fracgpu_add_command(NAME LIBRARY lib)
# Registers a `fracgpu NAME` subcommand. LIBRARY must define
#   void fracgpu::cli::Register<Camel>Command(CLI::App& app)
# where <Camel> is NAME in CamelCase (e.g. device-plugin -> DevicePlugin). src/cli
# generates the dispatch table from these registrations.
function(fracgpu_add_command name)
  cmake_parse_arguments(ARG "" "LIBRARY" "" ${ARGN})
  string(REPLACE "-" ";" parts ${name})
  set(camel "")
  foreach(p IN LISTS parts)
    string(SUBSTRING ${p} 0 1 first)
    string(TOUPPER ${first} first)
    string(SUBSTRING ${p} 1 -1 rest)
    string(APPEND camel ${first}${rest})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY FRACGPU_CLI_COMMANDS ${camel})
  set_property(GLOBAL APPEND PROPERTY FRACGPU_CLI_LIBS ${ARG_LIBRARY})
endfunction()

# fracgpu_add_test_dir(PREFIX prefix LIBS lib...)
# Every *_test.cc in the calling folder becomes one test executable <prefix>_<stem>, so
# tests can be added without editing the folder's CMakeLists.txt.
function(fracgpu_add_test_dir)
  cmake_parse_arguments(ARG "" "PREFIX" "LIBS" ${ARGN})
  file(GLOB test_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  foreach(src IN LISTS test_sources)
    get_filename_component(stem ${src} NAME_WE)
    fracgpu_add_test(${ARG_PREFIX}_${stem} SOURCES ${src} LIBS ${ARG_LIBS} LABELS ${ARG_PREFIX})
  endforeach()
endfunction()

# fracgpu_use_jemalloc(target)
# Links jemalloc into an executable when FRACGPU_JEMALLOC found it (the top-level
# CMakeLists.txt: not under the sanitizers, the fuzz build or `make demo`), so it serves every
# malloc of the process. --no-as-needed: nothing calls jemalloc by name (malloc is interposed;
# base/heap.cc finds mallctl at run time), so a linker run with --as-needed would drop it. The
# library's path goes between the flags itself: the imported target's would be placed at the
# end of the line, outside them.
function(fracgpu_use_jemalloc target)
  if(TARGET PkgConfig::JEMALLOC)
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed"
                          ${JEMALLOC_LINK_LIBRARIES} "-Wl,--pop-state")
  endif()
endfunction()
