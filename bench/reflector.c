/* A bare UDP reflector: the floor any DNS server is measured against.
 * Echoes each datagram with the QR bit set, batched with recvmmsg/sendmmsg (32 per call),
 * parsing nothing. Build: cc -O2 -o reflector reflector.c ; run: ./reflector PORT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum { BATCH = 32, BUF = 4096 };
static char buf[BATCH][BUF];

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 5308;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("bind"); return 1; }
    struct mmsghdr h[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = buf[i];
            iov[i].iov_len = BUF;
            memset(&h[i], 0, sizeof h[i]);
            h[i].msg_hdr.msg_name = &from[i];
            h[i].msg_hdr.msg_namelen = sizeof from[i];
            h[i].msg_hdr.msg_iov = &iov[i];
            h[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(fd, h, BATCH, MSG_WAITFORONE, NULL);
        if (n <= 0) continue;
        for (int i = 0; i < n; i++) {
            if (h[i].msg_len > 2) buf[i][2] |= 0x80;
            iov[i].iov_len = h[i].msg_len;
        }
        sendmmsg(fd, h, n, 0);
    }
}
