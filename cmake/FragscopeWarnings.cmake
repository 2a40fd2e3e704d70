# Warning and sanitizer flags shared by every fragscope target (agent included).
add_library(fragscope_warnings INTERFACE)
target_compile_options(fragscope_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Woverloaded-virtual -Wimplicit-fallthrough
  $<$<BOOL:${FRAGSCOPE_WERROR}>:-Werror>)
if(FRAGSCOPE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # Every target gets the runtime defaults (asan_defaults.cpp explains them).
  target_sources(fragscope_warnings INTERFACE ${CMAKE_CURRENT_LIST_DIR}/asan_defaults.cpp)
endif()
if(FRAGSCOPE_TSAN)
  if(FRAGSCOPE_SANITIZE)
    message(FATAL_ERROR "FRAGSCOPE_TSAN and FRAGSCOPE_SANITIZE cannot be combined: ThreadSanitizer excludes AddressSanitizer")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  target_sources(fragscope_warnings INTERFACE ${CMAKE_CURRENT_LIST_DIR}/tsan_defaults.cpp)
endif()
