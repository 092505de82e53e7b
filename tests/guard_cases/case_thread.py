import logging
def run():
    t = logging.threading.Thread(target=print); t.start(); t.join(); return "started"
