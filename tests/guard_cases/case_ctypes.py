import numpy
def run():
    c = numpy.ctypeslib.ctypes
    return c.string_at(id(run), 8)
