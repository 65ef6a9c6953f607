# Fix-up for building interfaces against the ROS 2 wheels from PyPI (no effect with a normal ROS install).
# The wheels' exported *__rosidl_generator_py targets carry the include dirs of the container they were built in
# (/opt/python/cp311-cp311/...), which do not exist here. Point them at this interpreter's headers instead.
if(DEFINED ENV{PARA_PYPI_ROS} AND "$ENV{PARA_PYPI_ROS}" STREQUAL "1")
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development NumPy)
  set(_para_py_includes "${Python3_INCLUDE_DIRS};${Python3_NumPy_INCLUDE_DIRS}")
  foreach(_pkg builtin_interfaces geometry_msgs std_msgs service_msgs action_msgs unique_identifier_msgs)
    if(TARGET ${_pkg}::${_pkg}__rosidl_generator_py)
      set_target_properties(${_pkg}::${_pkg}__rosidl_generator_py PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${_para_py_includes}")
    endif()
  endforeach()
endif()
