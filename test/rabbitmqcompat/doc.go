// Package rabbitmqcompat is the RabbitMQ corpus: each case's table, rows
// and Debezium Server properties run through Debezium Server 3.6.1 itself
// (test/dbzserver) and through pgoutbox, into one rabbitmq-server
// (test/rabbitmqtest) and one queue, and the two sides' messages are
// compared message for message: exchange, routing key, body, headers with
// their AMQP types, delivery mode and content-type, in order, equal or a
// listed deliberate difference.
package rabbitmqcompat
