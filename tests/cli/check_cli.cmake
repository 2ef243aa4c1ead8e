# Runs one `tally` command line and checks what a user sees: the exit code
# and what stdout and stderr say. Called by ctest (tests/CMakeLists.txt):
#   cmake -DTALLY=<tool> -DARGS=a|b|c -DCODES=0|3 [-DSTDOUT=regex] [-DSTDERR=regex]
#         [-DGPU_STDOUT=regex] [-DNO_GPU_STDERR=regex] [-DOUT_FILE=path -DOUT_FILE_MATCHES=regex]
#         -P check_cli.cmake
# CODES: the exit codes accepted ("|"-separated). Where 0 and a code for "no
# GPU" are both accepted (a --gpu run: 3 = no usable GPU; `solve cg`: 1),
# GPU_STDOUT must match a 0 and NO_GPU_STDERR any other code, and under
# TALLY_REQUIRE_GPU=1 (scripts/gpu-check) only 0 passes.
# OUT_FILE: a file the command must write (e.g. its --json FILE), removed
# before the run so that an earlier run's copy cannot pass; its content must
# match OUT_FILE_MATCHES.
cmake_minimum_required(VERSION 3.25)  # script mode: the policies of this CMake (IN_LIST)
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" codes "${CODES}")
if(DEFINED OUT_FILE)
  file(REMOVE "${OUT_FILE}")
endif()
execute_process(COMMAND "${TALLY}" ${args} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 300)
set(shown "tally ${args}\nexit code ${code}\n--- stdout\n${out}\n--- stderr\n${err}")
if(NOT code IN_LIST codes)
  message(FATAL_ERROR "exit code ${code}, expected one of ${codes}\n${shown}")
endif()
if("$ENV{TALLY_REQUIRE_GPU}" STREQUAL "1" AND DEFINED NO_GPU_STDERR AND NOT code EQUAL 0)
  message(FATAL_ERROR "TALLY_REQUIRE_GPU=1 and the --gpu run did not run on the GPU\n${shown}")
endif()
foreach(check STDOUT STDERR)
  string(TOLOWER ${check} stream)
  if(check STREQUAL "STDOUT")
    set(text "${out}")
  else()
    set(text "${err}")
  endif()
  if(DEFINED ${check} AND NOT text MATCHES "${${check}}")
    message(FATAL_ERROR "${stream} does not match '${${check}}'\n${shown}")
  endif()
endforeach()
if(code EQUAL 0 AND DEFINED GPU_STDOUT AND NOT out MATCHES "${GPU_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${GPU_STDOUT}'\n${shown}")
endif()
if(NOT code EQUAL 0 AND DEFINED NO_GPU_STDERR AND NOT err MATCHES "${NO_GPU_STDERR}")
  message(FATAL_ERROR "stderr does not match '${NO_GPU_STDERR}'\n${shown}")
endif()
if(DEFINED OUT_FILE)
  if(NOT EXISTS "${OUT_FILE}")
    message(FATAL_ERROR "${OUT_FILE} was not written\n${shown}")
  endif()
  file(READ "${OUT_FILE}" written)
  if(NOT written MATCHES "${OUT_FILE_MATCHES}")
    message(FATAL_ERROR "${OUT_FILE} does not match '${OUT_FILE_MATCHES}'\n${shown}\n--- ${OUT_FILE}\n${written}")
  endif()
endif()
