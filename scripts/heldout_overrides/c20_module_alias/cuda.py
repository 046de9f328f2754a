import c20_module_alias.interface as iface


class CudaPlatform(iface.Platform):
    def device_count(self):  # drift
        return 1
