# Installs gearbox as a CMake package, a pkg-config module and a CLI:
#
#   <prefix>/bin/gearbox
#   <prefix>/lib/libgearbox_{graph,gears,compiler,executor}.{a,so}
#   <prefix>/include/gearbox/{graph,gears,compiler,executor}/*.h, gearbox.h, version.h
#   <prefix>/lib/cmake/gearbox/gearbox{Config,ConfigVersion,Targets}.cmake
#   <prefix>/lib/pkgconfig/gearbox.pc
#   <prefix>/share/doc/gearbox/{LICENSE,CHANGELOG.md,README.md}
#
# Consumers: find_package(gearbox CONFIG REQUIRED) and link gearbox::gearbox (everything) or
# one layer: gearbox::graph, gearbox::gears, gearbox::compiler, gearbox::executor.
#
# Headers. They are installed by folder with FILES_MATCHING, so a header any stream adds to a
# library folder is installed without editing this file. The source files include each other
# as "graph/graph.h"; rather than rewrite those lines (every stream edits these files) or
# generate a forwarding header per file (one more list to keep in sync), the exported targets
# carry two include directories: <prefix>/include, for the documented <gearbox/...> spelling,
# and <prefix>/include/gearbox, which resolves the headers' own "graph/..." includes. The cost
# is that the folder names graph/, gears/, compiler/, executor/ are visible on a consumer's
# include path; consumers are told to write <gearbox/...> (docs and examples/consumer).

set(GEARBOX_LIBRARIES gearbox_graph gearbox_gears gearbox_compiler gearbox_executor)
foreach(lib ${GEARBOX_LIBRARIES})
  string(REPLACE "gearbox_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short} VERSION ${PROJECT_VERSION}
                                          SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  add_library(gearbox::${short} ALIAS ${lib})
endforeach()

# gearbox::gearbox: the whole API; the executor library pulls in the layers below it.
add_library(gearbox_all INTERFACE)
set_target_properties(gearbox_all PROPERTIES EXPORT_NAME gearbox)
target_link_libraries(gearbox_all INTERFACE gearbox_executor)
add_library(gearbox::gearbox ALIAS gearbox_all)

install(TARGETS ${GEARBOX_LIBRARIES} gearbox_all EXPORT gearboxTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_INCLUDEDIR}/gearbox)
install(TARGETS gearbox RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(dir graph gears compiler executor)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gearbox
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/gearbox/gearbox.h
              ${PROJECT_BINARY_DIR}/generated/gearbox/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gearbox)

include(CMakePackageConfigHelpers)
set(GEARBOX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gearbox)
install(EXPORT gearboxTargets NAMESPACE gearbox:: DESTINATION ${GEARBOX_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gearboxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gearboxConfig.cmake INSTALL_DESTINATION ${GEARBOX_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gearboxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gearboxConfig.cmake ${PROJECT_BINARY_DIR}/gearboxConfigVersion.cmake
        DESTINATION ${GEARBOX_CMAKE_DIR})

# gearbox.pc finds its prefix from its own location, so the installed tree can move.
file(RELATIVE_PATH GEARBOX_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/gearbox.pc.in ${PROJECT_BINARY_DIR}/gearbox.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gearbox.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
